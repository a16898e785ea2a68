import { describe, expect, it } from 'vitest'
import { pickPreview, stateLabel, type PreviewInfo } from '../src/lib/previews'

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
