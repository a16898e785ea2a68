// Live deltas (CONTRACT section 3): parsed without touching Last-Event-ID, shown as
// placeholders superseded by the stored message, command output capped and cleared.
import { beforeEach, describe, expect, it } from 'vitest'
import { parseDelta, RunFollower, SSEParser, type Delta } from '../src/lib/sse'
import type { EndEvent, Message } from '../src/lib/types'
import {
  applyDelta,
  applyEnd,
  buildView,
  emptyView,
  isLive,
  LIVE_OUTPUT_CAP,
  reduce,
} from '../src/lib/reducer'
import { describeEntry, isSkipped } from '../src/lib/entries'
import { fullRun, msg, resetSeq } from './fixtures'

beforeEach(() => resetSeq())

function deltaEvent(d: Partial<Delta> & { uuid: string; text: string }): string {
  return `event: delta\ndata: ${JSON.stringify({ action_type: 'auto_reply', ...d })}\n\n`
}

function messageEvent(m: Message): string {
  return `id: ${m.seq}\nevent: message\ndata: ${JSON.stringify(m)}\n\n`
}

function sseResponse(body: string): Response {
  const enc = new TextEncoder()
  const stream = new ReadableStream<Uint8Array>({
    start(ctrl) {
      ctrl.enqueue(enc.encode(body))
      ctrl.close()
    },
  })
  return new Response(stream, {
    status: 200,
    headers: { 'Content-Type': 'text/event-stream', 'X-Run-Id': 'r1', 'X-Conversation-Id': 'c1' },
  })
}

const END: EndEvent = { conversation_id: 'c1', run_id: 'r1', status: 'completed' }

describe('delta events', () => {
  it('have no id and do not move the last event id', () => {
    const run = fullRun()
    const p = new SSEParser()
    const evs = p.push(messageEvent(run[0]) + deltaEvent({ uuid: 'x', text: 'He' }))
    expect(evs.map((e) => [e.event, e.id])).toEqual([
      ['message', '1'],
      ['delta', null],
    ])
    expect(p.lastEventId).toBe('1')
  })

  it('parse only when well formed', () => {
    expect(parseDelta('{"uuid":"u","action_type":"terminal_run","stream":"stderr","text":"x"}'))
      .toEqual({ uuid: 'u', action_type: 'terminal_run', stream: 'stderr', text: 'x' })
    expect(parseDelta('{"uuid":"u","text":"x","stream":"bogus"}')).toEqual({
      uuid: 'u',
      action_type: '',
      text: 'x',
    })
    for (const bad of ['', 'nope', '[]', 'null', '{"text":"x"}', '{"uuid":"u"}', '{"uuid":"","text":"x"}'])
      expect(parseDelta(bad)).toBeNull()
  })

  it('reach onDelta in order and never count as seen seqs when reconnecting', async () => {
    const run = fullRun()
    const reply = run[1]
    const afters: (number | null)[] = []
    const deltas: Delta[] = []
    const order: string[] = []
    const f = new RunFollower({
      sleep: async () => {},
      async open(attempt, after) {
        afters.push(after)
        if (attempt === 0) {
          // the goal, two deltas of the reply, then the connection drops
          return sseResponse(
            messageEvent(run[0]) +
              deltaEvent({ uuid: reply.uuid, text: 'Sure, ' }) +
              deltaEvent({ uuid: reply.uuid, text: 'I will' }),
          )
        }
        return sseResponse(run.slice(1).map(messageEvent).join('') + `event: end\ndata: ${JSON.stringify(END)}\n\n`)
      },
      handlers: {
        onMessage: (m) => order.push(`m${m.seq}`),
        onDelta: (d) => {
          deltas.push(d)
          order.push(`d:${d.text}`)
        },
        onEnd: () => order.push('end'),
      },
    })
    await f.run()
    expect(afters).toEqual([null, 1])
    expect(deltas.map((d) => d.text)).toEqual(['Sure, ', 'I will'])
    expect(order.slice(0, 4)).toEqual(['m1', 'd:Sure, ', 'd:I will', 'm2'])
    expect(f.lastSeq).toBe(run.length)
  })

  it('are ignored by a follower without onDelta', async () => {
    const run = fullRun().slice(0, 2)
    const seen: number[] = []
    const f = new RunFollower({
      async open() {
        return sseResponse(
          messageEvent(run[0]) +
            deltaEvent({ uuid: run[1].uuid, text: 'x' }) +
            messageEvent(run[1]) +
            `event: end\ndata: ${JSON.stringify(END)}\n\n`,
        )
      },
      handlers: { onMessage: (m) => seen.push(m.seq), onEnd: () => {} },
    })
    await f.run()
    expect(seen).toEqual([1, 2])
  })
})

describe('reducer: live model text', () => {
  it('shows a placeholder as the text is written, replaced in place by the stored message', () => {
    const run = fullRun()
    const v = emptyView()
    reduce(v, run[0])
    const reply = run[1]
    applyDelta(v, 'r1', { uuid: reply.uuid, action_type: 'auto_reply', text: 'Sure, ' })
    applyDelta(v, 'r1', { uuid: reply.uuid, action_type: 'auto_reply', text: 'I will' })
    const turn = v.turns[0]
    expect(turn.blocks).toHaveLength(2)
    const live = turn.blocks[1].message
    expect(live.content).toBe('Sure, I will')
    expect(isLive(live)).toBe(true)
    expect(v.lastSeq).toBe(1)
    reduce(v, reply)
    expect(turn.blocks).toHaveLength(2)
    expect(turn.blocks[1].message).toEqual(reply)
    // a late delta never changes a stored message
    applyDelta(v, 'r1', { uuid: reply.uuid, action_type: 'auto_reply', text: ' late' })
    expect(turn.blocks[1].message.content).toBe('Sure, I will plan it.')
    for (const m of run.slice(2)) reduce(v, m)
    expect(v).toEqual(buildView(run))
  })

  it('puts narration in the running task and summary text where the summary goes', () => {
    const run = fullRun()
    const v = emptyView()
    for (const m of run.slice(0, 4)) reduce(v, m) // task 1 running
    applyDelta(v, 'r1', { uuid: 'n1', action_type: 'thinking', text: 'I will write it.' })
    const task = v.turns[0].tasks![0]
    expect(task.entries.map((e) => [e.uuid, e.type, e.meta.action_type])).toEqual([
      ['n1', 'narration', 'thinking'],
    ])
    applyDelta(v, 'r1', { uuid: 's1', action_type: 'summary', text: '# Do' })
    const last = v.turns[0].blocks[v.turns[0].blocks.length - 1]
    expect(last.message.meta.action_type).toBe('finish_summery')
    const stored = msg('thinking', 'I will write it.', {
      uuid: 'n1',
      type: 'narration',
      meta: { task_id: '1' },
    })
    reduce(v, stored)
    expect(task.entries[0]).toEqual(stored)
  })

  it('moves a placeholder put in a guessed task to where the stored message belongs', () => {
    const run = fullRun()
    const v = emptyView()
    for (const m of run.slice(0, 4)) reduce(v, m)
    applyDelta(v, 'r1', { uuid: 'n1', action_type: 'thinking', text: 'words' })
    const stored = msg('thinking', 'words', { uuid: 'n1', type: 'narration', meta: { task_id: '2' } })
    reduce(v, stored)
    const [t1, t2] = v.turns[0].tasks!
    expect(t1.entries).toEqual([])
    expect(t2.entries).toEqual([stored])
  })

  it('drops text that was never stored when the run ends', () => {
    const run = fullRun()
    const v = emptyView()
    reduce(v, run[0])
    applyDelta(v, 'r1', { uuid: 'gone', action_type: 'auto_reply', text: 'abandoned attempt' })
    expect(v.turns[0].blocks).toHaveLength(2)
    applyEnd(v, { conversation_id: 'c1', run_id: 'r1', status: 'failed' })
    expect(v.turns[0].blocks).toHaveLength(1)
    expect(v.index.gone).toBeUndefined()
  })
})

describe('reducer: live command output', () => {
  function atCommand(): { v: ReturnType<typeof emptyView>; run: Message[] } {
    const run = fullRun()
    const v = emptyView()
    for (const m of run.slice(0, 12)) reduce(v, m) // a3 running
    return { v, run }
  }

  it('collects stdout and stderr in order until the final message clears it', () => {
    const { v, run } = atCommand()
    applyDelta(v, 'r1', { uuid: 'a3', action_type: 'terminal_run', stream: 'stdout', text: 'one\n' })
    applyDelta(v, 'r1', { uuid: 'a3', action_type: 'terminal_run', stream: 'stdout', text: 'two\n' })
    applyDelta(v, 'r1', { uuid: 'a3', action_type: 'terminal_run', stream: 'stderr', text: 'warn\n' })
    expect(v.live.a3.parts).toEqual([
      { stream: 'stdout', text: 'one\ntwo\n' },
      { stream: 'stderr', text: 'warn\n' },
    ])
    expect(v.lastSeq).toBe(12)
    reduce(v, run[12]) // the final terminal_run message
    expect(v.live.a3).toBeUndefined()
    applyDelta(v, 'r1', { uuid: 'a3', action_type: 'terminal_run', stream: 'stdout', text: 'late' })
    expect(v.live.a3).toBeUndefined()
    for (const m of run.slice(13)) reduce(v, m)
    const { live: _a, ...rest } = v
    const { live: _b, ...want } = buildView(run)
    expect(rest).toEqual(want)
  })

  it('keeps only the last LIVE_OUTPUT_CAP characters', () => {
    const { v } = atCommand()
    const chunk = 'x'.repeat(10_000) + '\n'
    for (let i = 0; i < 10; i++)
      applyDelta(v, 'r1', { uuid: 'a3', action_type: 'terminal_run', stream: 'stdout', text: chunk })
    applyDelta(v, 'r1', { uuid: 'a3', action_type: 'terminal_run', stream: 'stdout', text: 'END' })
    const out = v.live.a3
    const text = out.parts.map((p) => p.text).join('')
    expect(text.length).toBe(LIVE_OUTPUT_CAP)
    expect(out.size).toBe(LIVE_OUTPUT_CAP)
    expect(text.endsWith('\nEND')).toBe(true)
    expect(out.dropped).toBe(10 * chunk.length + 3 - LIVE_OUTPUT_CAP)
  })

  it('drops what it already has when a catch-up overlaps the live output (offsets)', () => {
    const { v } = atCommand()
    const out = (text: string, offset: number, stream: 'stdout' | 'stderr' = 'stdout') =>
      applyDelta(v, 'r1', { uuid: 'a3', action_type: 'terminal_run', stream, text, offset })
    out('one\n', 0)
    out('two\n', 4)
    out('one\ntwo\nthr', 0) // a reconnect's catch-up: only 'thr' is new
    out('two\n', 4) // a late duplicate
    out('ee\n', 11)
    out('w\u00e9\ud83d\ude00!', 0, 'stderr') // code points, as the server counts
    out('\ud83d\ude00!\n', 2, 'stderr')
    expect(v.live.a3.parts).toEqual([
      { stream: 'stdout', text: 'one\ntwo\nthree\n' },
      { stream: 'stderr', text: 'w\u00e9\ud83d\ude00!\n' },
    ])
    out('later\n', 20) // past the end: the gap is marked, not hidden
    expect(v.live.a3.parts[2].text).toBe('[… 6 characters not shown …]\nlater\n')
  })

  it('is cleared when the run ends without a final message', () => {
    const { v } = atCommand()
    applyDelta(v, 'r1', { uuid: 'a3', action_type: 'terminal_run', stream: 'stdout', text: 'x' })
    applyEnd(v, { conversation_id: 'c1', run_id: 'r1', status: 'stopped' })
    expect(v.live).toEqual({})
  })
})

describe('skipped actions', () => {
  it('are told apart from failures and real finishes', () => {
    const skipped = msg('finish', 'Skipped: an earlier action in the same reply failed.', {
      status: 'failure',
      meta: { task_id: '1' },
    })
    expect(isSkipped(skipped)).toBe(true)
    expect(isSkipped(msg('terminal_run', 'Exit code: 1', { status: 'failure' }))).toBe(false)
    expect(isSkipped(msg('finish', 'Skipped it all, done.'))).toBe(false)
    expect(describeEntry(skipped).kind).toBe('finish')
  })
})
