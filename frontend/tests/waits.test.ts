import { describe, expect, it, beforeEach } from 'vitest'
import {
  applyRunStatus,
  buildView,
  emptyView,
  isTurnFinished,
  pendingWaits,
  reduce,
  turnStatus,
} from '../src/lib/reducer'
import {
  approvalRequest,
  classLabel,
  diffLines,
  pageTitle,
  waitOutcome,
} from '../src/lib/waits'
import { msg, resetSeq } from './fixtures'

beforeEach(() => resetSeq())

const TASK = { id: '1', title: 'Make the marker', description: '', requirement: '', status: 'running' }

/** a run that reached an approval of ``command`` in task 1 */
function parkedRun(command = 'touch marker') {
  const question = msg('question', 'make a marker')
  const plan = msg('plan', '', { meta: { json: [{ ...TASK, status: 'pending' }] } })
  const task = msg('task', '', { status: 'running', meta: { task_id: '1', json: [TASK] } })
  const approval = msg('approval', command, {
    status: 'running',
    meta: {
      task_id: '1',
      json: [{ action_type: 'terminal_run', class: 'terminal', params: { command } }],
    },
  })
  return [question, plan, task, approval]
}

function partner(of: ReturnType<typeof msg>, status: 'success' | 'failure', content: string) {
  const next = msg(of.meta.action_type, content, { status, meta: { ...of.meta } })
  return { ...next, uuid: of.uuid }
}

describe('a run waiting for a person', () => {
  it('reads as waiting while an approval is unanswered, as running once answered', () => {
    const run = parkedRun()
    const view = buildView(run)
    const turn = view.turns[0]
    expect(turnStatus(turn)).toBe('waiting')
    expect(isTurnFinished(turn)).toBe(false)
    expect(pendingWaits(turn).map((m) => m.uuid)).toEqual([run[3].uuid])
    reduce(view, partner(run[3], 'success', 'Approved'))
    expect(turnStatus(view.turns[0])).toBe('running')
  })

  it('the server status "waiting" keeps a run open (it is not an end)', () => {
    const view = buildView(parkedRun())
    applyRunStatus(view, 'r1', 'waiting')
    expect(view.turns[0].endStatus).toBeNull()
    expect(turnStatus(view.turns[0])).toBe('waiting')
    applyRunStatus(view, 'r1', 'stopped')
    expect(turnStatus(view.turns[0])).toBe('stopped')
  })

  it('keeps the request as asked when its answer replaces the message (live and replayed)', () => {
    const run = parkedRun('rm -rf build')
    const done = partner(run[3], 'failure', 'keep the build')
    const live = emptyView()
    for (const m of [...run, done]) reduce(live, structuredClone(m))
    const replay = buildView([...run, done])
    expect(replay).toEqual(live)
    const entry = replay.turns[0].tasks![0].entries[0]
    expect(entry.content).toBe('keep the build')
    expect(approvalRequest(replay.requests[entry.uuid]).text).toBe('rm -rf build')
  })
})

describe('approval requests', () => {
  it('a command is shown as a command, with its class', () => {
    const req = approvalRequest(parkedRun('ls -la')[3])
    expect(req).toMatchObject({ actionType: 'terminal_run', cls: 'terminal', view: 'command', text: 'ls -la' })
  })

  it('an edit is shown as a diff of its file', () => {
    const m = msg('approval', '--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n', {
      status: 'running',
      meta: { filepath: 'x.py', json: [{ action_type: 'edit_file', class: 'edits', params: { path: 'x.py' } }] },
    })
    expect(approvalRequest(m)).toMatchObject({ view: 'diff', filepath: 'x.py', cls: 'edits' })
  })

  it('another action without text for a person shows its parameters', () => {
    const m = msg('approval', '', {
      status: 'running',
      meta: { json: [{ action_type: 'web_fetch', class: 'web', params: { url: 'https://example.org' } }] },
    })
    const req = approvalRequest(m)
    expect(req.view).toBe('text')
    expect(JSON.parse(req.text)).toEqual({ url: 'https://example.org' })
  })

  it('names the classes for people', () => {
    expect(classLabel('terminal')).toBe('commands')
    expect(classLabel('edits', false)).toBe('file edit')
    expect(classLabel('browser')).toBe('browser actions')
    expect(classLabel('browser', false)).toBe('browser action')
    expect(classLabel('')).toBe('actions of this kind')
  })
})

describe('unified diffs', () => {
  it('marks headers, hunks, added, removed and context lines', () => {
    const text = '--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n keep\n-old\n+new\n--- dashes removed\n'
    expect(diffLines(text).map((l) => l.kind)).toEqual(['file', 'file', 'hunk', 'ctx', 'del', 'add', 'del'])
  })

  it('a second file in one diff gets its headers', () => {
    const text = '@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n@@ -0,0 +1 @@\n+c'
    expect(diffLines(text).map((l) => l.kind)).toEqual(['hunk', 'del', 'add', 'file', 'file', 'hunk', 'add'])
  })
})

describe('outcomes', () => {
  const run = parkedRun()
  const asked = run[3]
  it('pending while running; not answered once the run is over', () => {
    expect(waitOutcome(asked, false).state).toBe('pending')
    expect(waitOutcome(asked, true).state).toBe('interrupted')
  })
  it('approved, approved with the whole class, rejected with the reason', () => {
    expect(waitOutcome(partner(asked, 'success', 'Approved'), false)).toMatchObject({ state: 'approved', all: false })
    const all = partner(asked, 'success', 'Approved, with every later terminal action of this run')
    expect(waitOutcome(all, false)).toMatchObject({ state: 'approved', all: true })
    expect(waitOutcome(partner(asked, 'failure', 'not on my disk'), false)).toEqual({
      state: 'rejected',
      all: false,
      text: 'not on my disk',
    })
  })
  it('a timeout and a stop are told apart from a rejection', () => {
    const timeout = partner(
      asked,
      'failure',
      'Nobody approved it within 1800 seconds (APPROVAL_TIMEOUT), so it was not done. Go on without it.',
    )
    expect(waitOutcome(timeout, false).state).toBe('timed_out')
    expect(waitOutcome(partner(asked, 'failure', 'Stopped before it finished.'), false).state).toBe('stopped')
    expect(waitOutcome(partner(asked, 'failure', 'Interrupted: the server died'), false).state).toBe('interrupted')
    // a person's reason that merely mentions a stop or a timeout is still their rejection
    const reason = "don't, it stopped the server last time (timed out)"
    expect(waitOutcome(partner(asked, 'failure', reason), false)).toMatchObject({ state: 'rejected', text: reason })
    const question = msg('ask_user', 'Which port?', { status: 'running' })
    const unanswered = partner(question, 'failure', 'Nobody answered it within 60 seconds (APPROVAL_TIMEOUT), so it was not done.')
    expect(waitOutcome(unanswered, false).state).toBe('timed_out')
    // the partner carries the request it answers (its meta.json), not an outcome: its words tell
    const named = partner(asked, 'failure', 'whatever')
    expect(named.meta.json).toEqual(asked.meta.json)
    expect(waitOutcome(named, false).state).toBe('rejected')
  })
  it('a question is answered with its answer', () => {
    const q = msg('ask_user', 'Which port?', { status: 'running' })
    expect(waitOutcome(partner(q, 'success', '8080'), false)).toEqual({ state: 'answered', all: false, text: '8080' })
  })
})

describe('the page title', () => {
  it('says the run waits for the person first', () => {
    expect(pageTitle('Build it', true, true)).toBe('⏸ Waiting for you · Build it — planact')
    expect(pageTitle('Build it', true, false)).toBe('● Build it — planact')
    expect(pageTitle('', false, false)).toBe('planact')
  })
})

describe('a command shown whole', () => {
  it('names runs of spaces, tabs, invisible characters and folds empty lines, leaving nothing out', async () => {
    const { visibleRows, sizeLabel } = await import('../src/lib/waits')
    const padded = 'echo safe' + ' '.repeat(400) + '; touch HIDDEN1' + '\n'.repeat(80) + 'touch HIDDEN2'
    const rows = visibleRows(padded)
    expect(rows).toHaveLength(3)
    expect(rows[0].parts).toEqual([
      { kind: 'text', text: 'echo safe' },
      { kind: 'mark', text: '400 spaces', raw: ' '.repeat(400) },
      { kind: 'text', text: '; touch HIDDEN1' },
    ])
    expect(rows[1]).toEqual({ n: 2, blank: 79, parts: [] })
    expect(rows[2]).toEqual({ n: 81, blank: 0, parts: [{ kind: 'text', text: 'touch HIDDEN2' }] })
    expect(sizeLabel(padded)).toBe('81 lines · 517 characters')
    const odd = visibleRows('a\tb\u200bc  d \r')[0].parts.map((p) => p.text)
    expect(odd).toEqual(['a', '1 tab', 'b', 'U+200B', 'c  d', '1 space', 'CR'])
    const ended = visibleRows('ls\n\n')
    expect(ended.map((r) => r.parts.map((p) => p.text))).toEqual([['ls'], ['newline at end']])
    expect(sizeLabel('ls\n')).toBe('1 line · 3 characters')
  })
})
