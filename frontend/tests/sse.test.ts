import { beforeEach, describe, expect, it } from 'vitest'
import { readEventStream, RunFollower, SSEParser, type SSEEvent } from '../src/lib/sse'
import type { EndEvent, Message } from '../src/lib/types'
import { buildView, emptyView, reduce } from '../src/lib/reducer'
import { fullRun, resetSeq } from './fixtures'

beforeEach(() => resetSeq())

function encode(msgs: Message[], end?: EndEvent, sep = '\n'): string {
  let out = `: ping${sep}${sep}`
  for (const m of msgs) {
    out += `id: ${m.seq}${sep}event: message${sep}data: ${JSON.stringify(m)}${sep}${sep}`
  }
  if (end) out += `event: end${sep}data: ${JSON.stringify(end)}${sep}${sep}`
  return out
}

function parseAll(chunks: string[]): SSEEvent[] {
  const p = new SSEParser()
  return chunks.flatMap((c) => p.push(c))
}

function streamOf(chunks: (string | Uint8Array)[], close = true): ReadableStream<Uint8Array> {
  const enc = new TextEncoder()
  return new ReadableStream({
    start(ctrl) {
      for (const c of chunks) ctrl.enqueue(typeof c === 'string' ? enc.encode(c) : c)
      if (close) ctrl.close()
    },
  })
}

function sseResponse(body: string, headers: Record<string, string> = {}, close = true): Response {
  return new Response(streamOf([body], close), {
    status: 200,
    headers: { 'Content-Type': 'text/event-stream', ...headers },
  })
}

const END: EndEvent = { conversation_id: 'c1', run_id: 'r1', status: 'completed' }

describe('SSEParser', () => {
  it('parses messages, comments and end', () => {
    const msgs = fullRun().slice(0, 3)
    const evs = parseAll([encode(msgs, END)])
    expect(evs.map((e) => e.event)).toEqual(['message', 'message', 'message', 'end'])
    expect(evs.map((e) => e.id)).toEqual(['1', '2', '3', null])
    expect(JSON.parse(evs[1].data)).toEqual(msgs[1])
  })

  it('gives the same events whatever the chunk boundaries (LF, CRLF, CR)', () => {
    const msgs = fullRun()
    for (const sep of ['\n', '\r\n', '\r']) {
      const text = encode(msgs, END, sep)
      const whole = parseAll([text])
      expect(whole).toHaveLength(msgs.length + 1)
      for (const size of [1, 2, 3, 7, 64, 1000]) {
        const chunks: string[] = []
        for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size))
        expect(parseAll(chunks)).toEqual(whole)
      }
    }
  })

  it('joins multi-line data, ignores unknown fields and a space-less colon', () => {
    const evs = parseAll(['data:a\ndata: b\nretry: 10\nfoo: bar\n\n', 'event: x\ndata\n\n'])
    expect(evs).toEqual([
      { event: 'message', data: 'a\nb', id: null },
      { event: 'x', data: '', id: null },
    ])
  })

  it('does not dispatch an event without a blank line, nor one with no data', () => {
    expect(parseAll(['id: 4\nevent: message\n\n', 'data: x'])).toEqual([])
  })
})

describe('readEventStream', () => {
  it('decodes UTF-8 split inside a character across chunks', async () => {
    const bytes = new TextEncoder().encode('data: héllo – 世界 🎉\n\n')
    const chunks: Uint8Array[] = []
    for (let i = 0; i < bytes.length; i++) chunks.push(bytes.slice(i, i + 1))
    const got: string[] = []
    const r = await readEventStream(streamOf(chunks), (ev) => {
      got.push(ev.data)
    })
    expect(r).toBe('closed')
    expect(got).toEqual(['héllo – 世界 🎉'])
  })

  it('stops (cancels) when the handler says so', async () => {
    const got: string[] = []
    const r = await readEventStream(streamOf(['data: 1\n\ndata: 2\n\n'], false), (ev) => {
      got.push(ev.data)
      return false
    })
    expect(r).toBe('stopped')
    expect(got).toEqual(['1'])
  })
})

describe('RunFollower', () => {
  const noSleep = async () => {}

  it('POSTs once, then reconnects with the last seq until end, and stops after end', async () => {
    const run = fullRun()
    const calls: { attempt: number; after: number | null; runId: string | null }[] = []
    const live = emptyView()
    let end: EndEvent | null = null
    const f = new RunFollower({
      sleep: noSleep,
      async open(attempt, after, runId) {
        calls.push({ attempt, after, runId })
        if (attempt === 0) {
          // the connection drops after 5 messages, mid-event
          const text = encode(run.slice(0, 5)) + 'id: 6\nevent: mess'
          return sseResponse(text, { 'X-Run-Id': 'r1', 'X-Conversation-Id': 'c1' })
        }
        if (attempt === 1) return Promise.reject(new TypeError('network down'))
        // server replays after `after`, plus one overlapping message
        const rest = run.filter((m) => m.seq > (after ?? 0) - 1)
        return sseResponse(encode(rest, END))
      },
      handlers: {
        onMessage: (m) => reduce(live, m),
        onEnd: (e) => {
          end = e
        },
      },
    })
    await f.run()
    expect(calls).toEqual([
      { attempt: 0, after: null, runId: null },
      { attempt: 1, after: 5, runId: 'r1' },
      { attempt: 2, after: 5, runId: 'r1' },
    ])
    expect(end).toEqual(END)
    expect(f.ended).toBe(true)
    expect(f.conversationId).toBe('c1')
    expect(live).toEqual(buildView(run))
  })

  it('learns the run id from the messages when the headers lack it', async () => {
    const starts: string[] = []
    const afters: (number | null)[] = []
    const run = fullRun()
    const f = new RunFollower({
      sleep: noSleep,
      async open(attempt, after, runId) {
        afters.push(after)
        if (attempt === 0) return sseResponse(encode(run.slice(0, 3)))
        expect(runId).toBe('r1')
        return sseResponse(encode(run.slice(3), END))
      },
      handlers: { onMessage: () => {}, onEnd: () => {}, onStart: (i) => starts.push(i.runId) },
    })
    await f.run()
    expect(starts).toEqual(['r1'])
    expect(afters).toEqual([null, 3])
  })

  it('does not reconnect after end even if the server keeps the connection open', async () => {
    let opens = 0
    const f = new RunFollower({
      sleep: noSleep,
      async open() {
        opens++
        return sseResponse(encode(fullRun().slice(0, 2), END) + ': ping\n\n', {}, false)
      },
      handlers: { onMessage: () => {}, onEnd: () => {} },
    })
    await f.run()
    expect(opens).toBe(1)
  })

  it('an HTTP 4xx answer is final and reported', async () => {
    let opens = 0
    const errors: string[] = []
    const f = new RunFollower({
      sleep: noSleep,
      async open() {
        opens++
        return new Response(
          JSON.stringify({ error: { code: 'conflict', message: 'a run is already active' } }),
          { status: 409, headers: { 'Content-Type': 'application/json' } },
        )
      },
      handlers: { onMessage: () => {}, onEnd: () => {}, onError: (e) => errors.push(e.message) },
    })
    await expect(f.run()).rejects.toThrow('a run is already active')
    expect(opens).toBe(1)
    expect(errors).toEqual(['a run is already active'])
  })

  it('never re-posts a goal whose POST got no answer', async () => {
    let opens = 0
    const f = new RunFollower({
      sleep: noSleep,
      async open() {
        opens++
        throw new TypeError('Failed to fetch')
      },
      handlers: { onMessage: () => {}, onEnd: () => {} },
    })
    await expect(f.run()).rejects.toThrow('Failed to fetch')
    expect(opens).toBe(1)
  })

  it('resumes an existing run from a given seq and retries 5xx', async () => {
    const run = fullRun()
    const afters: (number | null)[] = []
    const got: number[] = []
    const f = new RunFollower({
      sleep: noSleep,
      runId: 'r1',
      after: 10,
      async open(_attempt, after) {
        afters.push(after)
        if (afters.length === 1) return new Response('busy', { status: 503 })
        return sseResponse(encode(run.filter((m) => m.seq > (after ?? 0)), END))
      },
      handlers: { onMessage: (m) => got.push(m.seq), onEnd: () => {} },
    })
    await f.run()
    expect(afters).toEqual([10, 10])
    expect(got).toEqual([11, 12, 13, 14, 15, 16, 17])
  })

  it('abort() ends following without reconnecting', async () => {
    let opens = 0
    const f = new RunFollower({
      sleep: noSleep,
      runId: 'r1',
      async open() {
        opens++
        const body = new ReadableStream<Uint8Array>({
          start(ctrl) {
            ctrl.enqueue(new TextEncoder().encode(': ping\n\n'))
          },
        })
        setTimeout(() => f.abort(), 10)
        return new Response(body, { status: 200 })
      },
      handlers: { onMessage: () => {}, onEnd: () => {} },
    })
    // the body never closes on its own; abort must still end run() via the signal
    await f.run()
    expect(opens).toBe(1)
    expect(f.ended).toBe(false)
  })

  it('an idle connection (no bytes, not even pings) is dropped and reopened', async () => {
    const afters: (number | null)[] = []
    const f = new RunFollower({
      sleep: noSleep,
      runId: 'r1',
      after: 0,
      idleTimeout: 20,
      async open(_a, after) {
        afters.push(after)
        if (afters.length === 1) {
          const silent = new ReadableStream<Uint8Array>({ start() {} })
          return new Response(silent, { status: 200 })
        }
        return sseResponse(encode(fullRun().slice(0, 1), END))
      },
      handlers: { onMessage: () => {}, onEnd: () => {} },
    })
    await f.run()
    expect(afters).toEqual([0, 0])
    expect(f.ended).toBe(true)
  })
})
