// Server-sent events over fetch: an incremental parser (WHATWG event-stream rules) and a
// run follower that reconnects after a dropped connection and stops for good after `end`.

import type { DeltaEvent } from './api.gen'
import type { EndEvent, Message } from './types'

/** A live, unstored piece of a message being produced (docs/api.md "The stream", `event: delta`):
 *  the server's DeltaEvent (backend/messages/deltas.py, generated). No `id:` line: it never
 *  moves Last-Event-ID and is never replayed. ``offset`` (command output): where `text`
 *  starts in that stream of that command (characters, i.e. code points); a reader drops
 *  what it already has (a catch-up after a reload overlaps). */
export type Delta = DeltaEvent

/** The delta in an event's data, or null when it is not a well-formed delta (read at the
 *  boundary: what passes is a DeltaEvent, without the fields it does not have). */
export function parseDelta(data: string): Delta | null {
  let raw: unknown
  try {
    raw = JSON.parse(data)
  } catch {
    return null
  }
  if (!raw || typeof raw !== 'object') return null
  const o = raw as Record<string, unknown>
  if (typeof o.uuid !== 'string' || !o.uuid || typeof o.text !== 'string') return null
  const d: Delta = {
    uuid: o.uuid,
    action_type: typeof o.action_type === 'string' ? o.action_type : '',
    text: o.text,
  }
  if (o.stream === 'stdout' || o.stream === 'stderr') d.stream = o.stream
  if (typeof o.offset === 'number' && Number.isInteger(o.offset) && o.offset >= 0) d.offset = o.offset
  return d
}

export interface SSEEvent {
  event: string
  data: string
  id: string | null
}

/** Incremental text/event-stream parser. Feed it decoded text in any chunking. */
export class SSEParser {
  private buf = ''
  private data: string[] = []
  private event = ''
  private id: string | null = null
  private hasData = false
  private pendingCR = false
  lastEventId: string | null = null

  push(chunk: string): SSEEvent[] {
    const out: SSEEvent[] = []
    let text = chunk
    if (this.pendingCR) {
      // a '\r' ended the previous chunk; a leading '\n' belongs to the same line break
      if (text.startsWith('\n')) text = text.slice(1)
      this.pendingCR = false
    }
    this.buf += text
    let start = 0
    for (let i = 0; i < this.buf.length; i++) {
      const c = this.buf.charCodeAt(i)
      if (c !== 10 && c !== 13) continue
      const line = this.buf.slice(start, i)
      if (c === 13) {
        if (i + 1 < this.buf.length) {
          if (this.buf.charCodeAt(i + 1) === 10) i++
        } else {
          this.pendingCR = true
        }
      }
      start = i + 1
      const ev = this.line(line)
      if (ev) out.push(ev)
    }
    this.buf = this.buf.slice(start)
    return out
  }

  private line(line: string): SSEEvent | null {
    if (line === '') return this.dispatch()
    if (line.startsWith(':')) return null // comment, e.g. ": ping"
    const colon = line.indexOf(':')
    let field = line
    let value = ''
    if (colon >= 0) {
      field = line.slice(0, colon)
      value = line.slice(colon + 1)
      if (value.startsWith(' ')) value = value.slice(1)
    }
    if (field === 'data') {
      this.data.push(value)
      this.hasData = true
    } else if (field === 'event') {
      this.event = value
    } else if (field === 'id') {
      if (!value.includes('\0')) this.id = value
    }
    // 'retry' and unknown fields are ignored
    return null
  }

  private dispatch(): SSEEvent | null {
    if (this.id !== null) this.lastEventId = this.id
    const ev: SSEEvent | null = this.hasData
      ? { event: this.event || 'message', data: this.data.join('\n'), id: this.id }
      : null
    this.data = []
    this.event = ''
    this.id = null
    this.hasData = false
    return ev
  }
}

/** Read a fetch body as SSE, calling onEvent per event; resolves when the body closes or
 *  onEvent returns false (the reader is then cancelled). */
export async function readEventStream(
  body: ReadableStream<Uint8Array>,
  onEvent: (ev: SSEEvent) => boolean | void,
  onBytes?: () => void,
  signal?: AbortSignal,
): Promise<'closed' | 'stopped'> {
  const reader = body.getReader()
  const onAbort = () => void reader.cancel().catch(() => {})
  if (signal?.aborted) onAbort()
  signal?.addEventListener('abort', onAbort)
  const decoder = new TextDecoder('utf-8')
  const parser = new SSEParser()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) {
        const tail = decoder.decode()
        for (const ev of parser.push(tail)) if (onEvent(ev) === false) return 'stopped'
        return 'closed'
      }
      onBytes?.()
      for (const ev of parser.push(decoder.decode(value, { stream: true }))) {
        if (onEvent(ev) === false) {
          await reader.cancel().catch(() => {})
          return 'stopped'
        }
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort)
    try {
      reader.releaseLock()
    } catch {
      /* already released */
    }
  }
}

export class HttpError extends Error {
  constructor(
    public status: number,
    message: string,
    public code = '',
    public retryable = false,
  ) {
    super(message)
  }
}

export async function errorFromResponse(res: Response): Promise<HttpError> {
  let message = `${res.status} ${res.statusText}`.trim()
  let code = ''
  try {
    const j = await res.json()
    if (j && j.error) {
      message = j.error.message || message
      code = j.error.code || ''
    }
  } catch {
    /* not JSON */
  }
  return new HttpError(res.status, message, code)
}

export interface FollowHandlers {
  onMessage(msg: Message): void
  /** live text or command output of a message being produced (never stored) */
  onDelta?(delta: Delta): void
  /** the run's end; `null` when the end event could not be read (the run has ended all
   * the same: GET /api/conversations/{id} says how) */
  onEnd(end: EndEvent | null): void
  /** first response arrived: the run and conversation ids are known */
  onStart?(info: { runId: string; conversationId: string }): void
  /** connection state for the UI */
  onState?(state: 'connecting' | 'live' | 'reconnecting' | 'closed'): void
  onError?(err: Error): void
}

export interface FollowOptions {
  /** opens the stream; `after` is the last seq seen (null on the very first attempt) */
  open(attempt: number, after: number | null, runId: string | null): Promise<Response>
  handlers: FollowHandlers
  /** seq already seen before the first attempt (resume) */
  after?: number
  runId?: string | null
  /** delay before reconnect attempt n (1-based), ms */
  backoff?: (attempt: number) => number
  /** give up an attempt that receives no bytes (not even pings) for this long, ms */
  idleTimeout?: number
  maxAttempts?: number
  sleep?: (ms: number) => Promise<void>
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/**
 * Follow one run to its `end`: calls `open` (POST the first time, GET …/events after), parses
 * the stream, and on a dropped connection reopens with the last seen seq. Never reconnects
 * after `end`, after abort(), or after an HTTP 4xx answer.
 */
export class RunFollower {
  runId: string | null
  conversationId = ''
  lastSeq: number
  ended = false
  private aborted = false
  private ctrl: AbortController | null = null

  constructor(private opts: FollowOptions) {
    this.runId = opts.runId ?? null
    this.lastSeq = opts.after ?? 0
  }

  get signal(): AbortSignal | undefined {
    return this.ctrl?.signal
  }

  abort(): void {
    this.aborted = true
    this.ctrl?.abort()
  }

  /** Resolves when the run ended, the follower was aborted, or it gave up (rejects). */
  async run(): Promise<void> {
    const { handlers } = this.opts
    const sleep = this.opts.sleep ?? defaultSleep
    const backoff = this.opts.backoff ?? ((n: number) => Math.min(500 * 2 ** (n - 1), 8000))
    const maxAttempts = this.opts.maxAttempts ?? Infinity
    let attempt = 0
    let failures = 0
    while (!this.ended && !this.aborted) {
      handlers.onState?.(attempt === 0 ? 'connecting' : 'reconnecting')
      this.ctrl = new AbortController()
      let idleTimer: ReturnType<typeof setTimeout> | null = null
      const kick = () => {
        if (!this.opts.idleTimeout) return
        if (idleTimer) clearTimeout(idleTimer)
        idleTimer = setTimeout(() => this.ctrl?.abort(), this.opts.idleTimeout)
      }
      let gotEvent = false
      try {
        const after = attempt === 0 && this.opts.after === undefined ? null : this.lastSeq
        const res = await this.opts.open(attempt, after, this.runId)
        if (!res.ok) {
          const err = await errorFromResponse(res)
          if (res.status >= 400 && res.status < 500) throw err // not retryable
          throw Object.assign(err, { retryable: true })
        }
        const rid = res.headers.get('X-Run-Id')
        const cid = res.headers.get('X-Conversation-Id')
        if (rid) this.runId = rid
        if (cid) this.conversationId = cid
        if (attempt === 0 && this.runId) {
          handlers.onStart?.({ runId: this.runId, conversationId: this.conversationId })
        }
        if (!res.body) throw Object.assign(new Error('empty stream'), { retryable: true })
        handlers.onState?.('live')
        kick()
        await readEventStream(
          res.body,
          (ev) => {
            kick()
            if (ev.event === 'end') {
              let end: EndEvent | null
              try {
                end = JSON.parse(ev.data) as EndEvent
              } catch {
                end = null
              }
              this.ended = true
              handlers.onEnd(end)
              return false
            }
            if (ev.event === 'delta') {
              // no seq: it neither advances nor is checked against lastSeq
              const delta = parseDelta(ev.data)
              if (delta) handlers.onDelta?.(delta)
              return true
            }
            if (ev.event !== 'message') return true
            let msg: Message
            try {
              msg = JSON.parse(ev.data)
            } catch {
              return true
            }
            gotEvent = true
            const seq = Number(msg.seq ?? ev.id) || 0
            if (seq > 0 && seq <= this.lastSeq) return true // overlap after reconnect
            if (seq > this.lastSeq) this.lastSeq = seq
            if (!this.conversationId && msg.conversation_id) this.conversationId = msg.conversation_id
            if (!this.runId && msg.run_id) {
              // no X-Run-Id header (a proxy dropped it?): the messages name the run too
              this.runId = msg.run_id
              handlers.onStart?.({ runId: this.runId, conversationId: this.conversationId })
            }
            handlers.onMessage(msg)
            return true
          },
          kick,
          this.ctrl.signal,
        )
      } catch (e) {
        const err = e as Error & { retryable?: boolean; status?: number }
        if (this.aborted) break
        const isHttp = err instanceof HttpError
        if (isHttp && !err.retryable) {
          handlers.onState?.('closed')
          handlers.onError?.(err)
          throw err
        }
        // network error or idle timeout: fall through to reconnect
        if (attempt === 0 && !this.runId) {
          // the POST never answered: we cannot know the run, do not re-post the goal
          handlers.onState?.('closed')
          handlers.onError?.(err)
          throw err
        }
      } finally {
        if (idleTimer) clearTimeout(idleTimer)
      }
      if (this.ended || this.aborted) break
      attempt++
      failures = gotEvent ? 1 : failures + 1
      if (failures > maxAttempts) {
        const err = new Error('lost the connection to the run')
        handlers.onState?.('closed')
        handlers.onError?.(err)
        throw err
      }
      handlers.onState?.('reconnecting')
      await sleep(backoff(failures))
    }
    handlers.onState?.('closed')
  }
}
