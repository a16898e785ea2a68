import { describe, expect, it } from 'vitest'
import { pickPreview, previewActivity, stateLabel, type PreviewInfo } from '../src/lib/previews'
import { buildView, reduce } from '../src/lib/reducer'
import { fullRun, msg } from './fixtures'

function p(name: string, state: PreviewInfo['state']): PreviewInfo {
  return { name, port: 8000, path: '/', url: `http://p/${name}/`, state, started_at: null, log: [] }
}

describe('pickPreview', () => {
  it('shows the named preview, else the newest running one, else the newest', () => {
    const list = [p('a', 'ready'), p('b', 'ready'), p('c', 'stopped')]
    expect(pickPreview(list, 'c')?.name).toBe('c')
    expect(pickPreview(list, null)?.name).toBe('b')
    expect(pickPreview(list, 'gone')?.name).toBe('b')
    expect(pickPreview([p('x', 'failed'), p('y', 'stopped')], null)?.name).toBe('y')
    expect(pickPreview([], null)).toBeNull()
  })

  it('names every state for a person', () => {
    expect(stateLabel('ready')).toBe('running')
    expect(stateLabel('starting')).toBe('starting…')
    expect(stateLabel('failed')).toBe('failed')
  })
})

describe('previewActivity', () => {
  it("changes when a task's preview action runs and when it is ready, not otherwise", () => {
    const run = fullRun()
    let view = buildView(run.slice(0, 5)) // the plan and task 1 running
    const before = previewActivity(view.turns)
    view = reduce(view, msg('write_code', 'x', { uuid: 'w9', meta: { task_id: '1' } }))
    expect(previewActivity(view.turns)).toBe(before)
    const meta = { task_id: '1', content: 'preview 8080' }
    view = reduce(view, msg('preview', 'starting', { uuid: 'p1', status: 'running', meta }))
    const started = previewActivity(view.turns)
    expect(started).not.toBe(before)
    // it lives among the task's entries, not the turn's blocks
    expect(view.turns[0].blocks.some((b) => b.message.meta?.action_type === 'preview')).toBe(false)
    view = reduce(view, msg('preview', 'Preview ready', { uuid: 'p1', status: 'success', meta }))
    expect(previewActivity(view.turns)).not.toBe(started)
  })
})
