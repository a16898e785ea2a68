import { beforeEach, describe, expect, it } from 'vitest'
import {
  applyEnd,
  buildView,
  emptyView,
  progress,
  progressText,
  reduce,
  summaryFiles,
  turnStatus,
  type Turn,
} from '../src/lib/reducer'
import { describeEntry } from '../src/lib/entries'
import { fullRun, msg, resetSeq } from './fixtures'
import type { MetaItem } from '../src/lib/message.gen'

beforeEach(() => resetSeq())

function blocksOf(turn: Turn): string[] {
  return turn.blocks.map((b) => (b.kind === 'plan' ? 'plan' : b.message.meta.action_type))
}

describe('reducer', () => {
  it('builds goal, reply, plan with tasks and their entries, summary', () => {
    const view = buildView(fullRun())
    expect(view.turns).toHaveLength(1)
    const turn = view.turns[0]
    expect(blocksOf(turn)).toEqual(['question', 'auto_reply', 'plan', 'finish_summery'])
    expect(turn.tasks?.map((t) => [t.id, t.title, t.status])).toEqual([
      ['1', 'Write the script', 'completed'],
      ['2', 'Run it', 'completed'],
    ])
    const t1 = turn.tasks![0].entries.map((m) => m.meta.action_type)
    expect(t1).toEqual(['thinking', 'write_code', 'read_file', 'finish'])
    const t2 = turn.tasks![1].entries.map((m) => m.meta.action_type)
    expect(t2).toEqual(['terminal_run', 'browse_web', 'finish'])
    expect(progress(turn)).toEqual({ completed: 2, failed: 0, stopped: 0, total: 2 })
    expect(progressText(progress(turn))).toBe('2 of 2 tasks done')
    expect(turn.hasSummary).toBe(true)
    expect(view.lastSeq).toBe(17)
  })

  it('upserts running -> final by uuid, in place', () => {
    const view = emptyView()
    const run = fullRun()
    for (const m of run.slice(0, 6)) reduce(view, m) // up to write_code running
    const task = view.turns[0].tasks![0]
    expect(task.entries.map((m) => [m.uuid, m.status])).toEqual([
      ['u5', 'success'],
      ['a1', 'running'],
    ])
    reduce(view, run[6])
    expect(task.entries.map((m) => [m.uuid, m.status])).toEqual([
      ['u5', 'success'],
      ['a1', 'success'],
    ])
    expect(task.entries[1].content).toBe('File hello.py written successfully.')
  })

  it('replay equals live, whatever the chunking and with reconnect overlaps', () => {
    const run = fullRun()
    const live = emptyView()
    for (const m of run) reduce(live, structuredClone(m))
    const replay = buildView(structuredClone(run))
    expect(replay).toEqual(live)
    // reconnect: the tail is delivered again from an earlier seq
    const overlap = emptyView()
    for (const m of run.slice(0, 10)) reduce(overlap, structuredClone(m))
    for (const m of run.slice(6)) reduce(overlap, structuredClone(m))
    expect(overlap).toEqual(live)
    // replay of the first part + live tail
    const resumed = buildView(structuredClone(run.slice(0, 8)))
    for (const m of run.slice(8)) reduce(resumed, structuredClone(m))
    expect(resumed).toEqual(live)
  })

  it('shows unknown action types rather than dropping them', () => {
    const view = emptyView()
    reduce(view, msg('question', 'goal'))
    reduce(view, msg('mystery', 'something new'))
    reduce(view, msg('other_thing', 'in a task', { meta: { task_id: '7' } }))
    const turn = view.turns[0]
    expect(blocksOf(turn)).toEqual(['question', 'mystery', 'plan'])
    expect(turn.tasks![0].id).toBe('7')
    expect(turn.tasks![0].entries[0].content).toBe('in a task')
    const d = describeEntry(turn.tasks![0].entries[0])
    expect(d.kind).toBe('other')
    expect(d.label).toBe('other thing')
    expect(d.output).toBe('in a task')
  })

  it('tolerates messages with no meta or no seq', () => {
    const view = emptyView()
    const bare = { uuid: 'x', content: 'hi', run_id: 'r1', seq: 0 } as never
    reduce(view, bare)
    expect(view.turns[0].blocks).toHaveLength(1)
  })

  it('a chat-only run is goal + reply', () => {
    const view = buildView([msg('question', 'what is 2+2?'), msg('auto_reply', '4')])
    expect(blocksOf(view.turns[0])).toEqual(['question', 'auto_reply'])
    expect(view.turns[0].tasks).toBeNull()
    expect(turnStatus(view.turns[0])).toBe('running')
    applyEnd(view, { conversation_id: 'c1', run_id: 'r1', status: 'completed' })
    expect(turnStatus(view.turns[0])).toBe('completed')
  })

  it('error and stop states', () => {
    const failed = buildView([
      msg('question', 'g'),
      msg('error', 'LLM_MODEL is not set', { status: 'failure' }),
      msg('finish_summery', 'nothing made'),
    ])
    expect(turnStatus(failed.turns[0])).toBe('failed')
    expect(blocksOf(failed.turns[0])).toEqual(['question', 'error', 'finish_summery'])
    const stopped = buildView([msg('question', 'g'), msg('stop', 'Stopped by the user')])
    expect(turnStatus(stopped.turns[0])).toBe('stopped')
  })

  it('groups several runs of one conversation into turns', () => {
    const view = buildView([...fullRun('r1'), ...fullRun('r2')])
    expect(view.turns.map((t) => t.runId)).toEqual(['r1', 'r2'])
    expect(view.turns[1].tasks).toHaveLength(2)
  })

  it('keeps task entries when the plan is re-sent, and failed tasks count', () => {
    const plan = [{ id: '1', title: 'A', description: '', requirement: '', status: 'pending' }]
    const view = buildView([
      msg('plan', '', { meta: { json: plan } }),
      msg('task', '', { status: 'running', meta: { task_id: '1', json: [{ ...plan[0], status: 'running' }] } }),
      msg('write_code', 'x', { meta: { task_id: '1', filepath: 'a.txt' } }),
      msg('plan', '', { meta: { json: plan } }),
      msg('task', '', { status: 'failure', meta: { task_id: '1', json: [{ ...plan[0], status: 'failed' }] } }),
    ])
    const t = view.turns[0].tasks!
    expect(t).toHaveLength(1)
    expect(t[0].entries).toHaveLength(1)
    expect(t[0].status).toBe('failed')
    expect(progress(view.turns[0])).toEqual({ completed: 0, failed: 1, stopped: 0, total: 1 })
    expect(progressText(progress(view.turns[0]))).toBe('1 task · failed')
  })

  it('reads the summary file list', () => {
    const run = fullRun()
    expect(summaryFiles(run[run.length - 1])).toEqual([
      { filepath: 'hello.py', filename: 'hello.py', url: '/api/files/c1/hello.py', filesize: 12 },
    ])
    // a newer writer's items this reader does not know are passed over
    const unknown = [null, 3, {}, { preview: { name: 'app' } }] as unknown as MetaItem[]
    expect(summaryFiles(msg('finish_summery', '', { meta: { json: unknown } }))).toEqual([])
  })
})

describe('describeEntry: every action type', () => {
  it('write_code shows the path and the result', () => {
    const run = fullRun()
    const running = describeEntry(run[5])
    expect(running).toMatchObject({ kind: 'write_code', filepath: 'hello.py', output: '' })
    const done = describeEntry(run[6])
    expect(done).toMatchObject({
      kind: 'write_code',
      label: 'Write',
      filepath: 'hello.py',
      output: 'File hello.py written successfully.',
    })
  })

  it('read_file shows the path and the text', () => {
    expect(describeEntry(fullRun()[7])).toMatchObject({
      kind: 'read_file',
      filepath: 'hello.py',
      output: 'print("hi")\n',
    })
  })

  it('terminal_run shows the command and output, long output collapsed', () => {
    const run = fullRun()
    expect(describeEntry(run[11])).toMatchObject({
      kind: 'terminal_run',
      command: 'python3 hello.py',
      output: '',
    })
    const done = describeEntry(run[12])
    expect(done.command).toBe('python3 hello.py')
    expect(done.output).toContain('Exit code: 0')
    expect(done.long).toBe(false)
    const long = describeEntry(
      msg('terminal_run', Array.from({ length: 40 }, (_, i) => `line ${i}`).join('\n'), {
        meta: { content: 'terminal_run: seq 40' },
      }),
    )
    expect(long.long).toBe(true)
    expect(long.lines).toBe(40)
  })

  it('thinking and finish', () => {
    expect(describeEntry(msg('thinking', 'hmm')).kind).toBe('thinking')
    expect(describeEntry(msg('finish', 'done')).kind).toBe('finish')
  })

  it('reads the task a stop interrupted as stopped, not failed, and leaves the bar unfilled', () => {
    const plan = [
      { id: '1', title: 'One', description: '', requirement: '', status: 'pending' },
      { id: '2', title: 'Two', description: '', requirement: '', status: 'pending' },
      { id: '3', title: 'Three', description: '', requirement: '', status: 'pending' },
    ]
    const done = { ...plan[0], status: 'completed' }
    const view = buildView([
      msg('plan', '', { meta: { json: plan } }),
      msg('task', '', { status: 'success', meta: { task_id: '1', json: [done] } }),
      msg('task', '', { status: 'running', meta: { task_id: '2', json: [{ ...plan[1], status: 'running' }] } }),
      msg('stop', 'The run was stopped.', { status: 'failure' }),
      msg('task', '', { status: 'failure', meta: { task_id: '2', json: [{ ...plan[1], status: 'failed' }] } }),
    ])
    const turn = view.turns[0]
    expect(turnStatus(turn)).toBe('stopped')
    expect(progress(turn)).toEqual({ completed: 1, failed: 0, stopped: 1, total: 3 })
    expect(progressText(progress(turn))).toBe('1 of 3 tasks done · 1 stopped')
  })

  it('says a single task plainly', () => {
    expect(progressText({ completed: 1, failed: 0, stopped: 0, total: 1 })).toBe('1 task done')
    expect(progressText({ completed: 0, failed: 0, stopped: 1, total: 1 })).toBe('1 task · stopped')
    expect(progressText({ completed: 0, failed: 0, stopped: 0, total: 1 })).toBe('1 task')
  })
})
