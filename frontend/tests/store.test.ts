// @vitest-environment jsdom
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createPinia, setActivePinia } from 'pinia'
import { useApp } from '../src/stores/app'
import { setToken, setTokenAsker } from '../src/lib/api'
import { buildView, turnStatus } from '../src/lib/reducer'
import type { EndEvent, Message } from '../src/lib/types'
import { detailOf, figuresOf, fullRun, resetSeq, runOf, summaryOf } from './fixtures'

interface Call {
  method: string
  url: string
  headers: Record<string, string>
  body: unknown
}

function sse(msgs: Message[], end?: EndEvent): string {
  let out = ''
  for (const m of msgs) out += `id: ${m.seq}\nevent: message\ndata: ${JSON.stringify(m)}\n\n`
  if (end) out += `event: end\ndata: ${JSON.stringify(end)}\n\n`
  return out
}

type Handler = (call: Call) => Response | Promise<Response>

function mockFetch(routes: Record<string, Handler>): Call[] {
  const calls: Call[] = []
  vi.stubGlobal('fetch', async (input: string, init: RequestInit = {}) => {
    const headers: Record<string, string> = {}
    new Headers(init.headers).forEach((v, k) => (headers[k] = v))
    const call: Call = {
      method: init.method ?? 'GET',
      url: input,
      headers,
      body: init.body ? JSON.parse(String(init.body)) : undefined,
    }
    calls.push(call)
    const key = `${call.method} ${input.split('?')[0]}`
    const h = routes[key]
    if (!h) return new Response(JSON.stringify({ error: { message: `no route ${key}` } }), { status: 404 })
    return h(call)
  })
  return calls
}

const json = (v: unknown, status = 200) =>
  new Response(JSON.stringify(v), { status, headers: { 'Content-Type': 'application/json' } })

async function until(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (pred()) return
    await new Promise((r) => setTimeout(r, 5))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const END: EndEvent = { conversation_id: 'c1', run_id: 'r1', status: 'completed' }

beforeEach(() => {
  resetSeq()
  setActivePinia(createPinia())
  setToken(null)
  window.history.replaceState(null, '', '/')
})
afterEach(() => vi.unstubAllGlobals())

describe('store', () => {
  it('reopens the conversation in the URL and follows its active run after the last seq', async () => {
    const run = fullRun()
    window.history.replaceState(null, '', '/#/c/c1')
    const calls = mockFetch({
      'GET /api/health': () => json({ status: 'ok' }),
      'GET /api/settings': () => json({ model: 'm', models: ['m'], runtimes: ['local'], auth: false }),
      'GET /api/conversations': () =>
        json([summaryOf({ title: 'hello', status: 'running' })]),
      'GET /api/conversations/c1': () =>
        json(detailOf({ status: 'running', runs: [runOf({ status: 'running' })] })),
      'GET /api/conversations/c1/messages': () => json(run.slice(0, 8)),
      'GET /api/agent/runs/r1/events': (c) => {
        const after = Number(c.headers['last-event-id'])
        return new Response(sse(run.filter((m) => m.seq > after), END), { status: 200 })
      },
    })
    const app = useApp()
    await app.init()
    expect(app.currentId).toBe('c1')
    await until(() => app.activeRunId === null && app.view.lastSeq === 17, 'the run to end')
    const ev = calls.find((c) => c.url.startsWith('/api/agent/runs/r1/events'))!
    expect(ev.url).toBe('/api/agent/runs/r1/events?after=8')
    expect(ev.headers['last-event-id']).toBe('8')
    const expected = buildView(run)
    expected.turns[0].endStatus = 'completed'
    expect(JSON.parse(JSON.stringify(app.view))).toEqual(JSON.parse(JSON.stringify(expected)))
    expect(turnStatus(app.view.turns[0])).toBe('completed')
    expect(app.showRuntime).toBe(false)
  })

  it('sends a goal, learns the new conversation id and puts it in the URL', async () => {
    const run = fullRun()
    const calls = mockFetch({
      'GET /api/health': () => json({ status: 'ok' }),
      'GET /api/settings': () =>
        json({ model: 'm', models: ['m'], runtimes: ['local', 'docker'], auth: false }),
      'GET /api/conversations': () => json([]),
      'GET /api/conversations/c1': () =>
        json(
          detailOf({
            status: 'completed',
            usage: {
              total: figuresOf({ calls: 2, prompt_tokens: 6, completion_tokens: 3, total_tokens: 9, cost: null }),
              stages: {},
            },
          }),
        ),
      'POST /api/agent/run': () =>
        new Response(sse(run, END), {
          status: 200,
          headers: { 'X-Run-Id': 'r1', 'X-Conversation-Id': 'c1' },
        }),
    })
    const app = useApp()
    await app.init()
    expect(app.showRuntime).toBe(true)
    await app.send('  Write hello.py  ', 'agent', 'docker')
    await until(() => app.view.lastSeq === 17 && !app.running, 'the run')
    const post = calls.find((c) => c.method === 'POST')!
    expect(post.body).toEqual({ goal: 'Write hello.py', mode: 'agent', runtime: 'docker' })
    expect(post.headers.accept).toBe('text/event-stream')
    expect(app.currentId).toBe('c1')
    expect(window.location.hash).toBe('#/c/c1')
    await until(() => app.usage.tokens === 9, 'usage')
  })

  it('asks for the token once on 401 and sends it as a bearer token', async () => {
    const asked: string[] = []
    setTokenAsker(async (reason) => {
      asked.push(reason)
      return 'tok'
    })
    const calls = mockFetch({
      'GET /api/health': () => json({ status: 'ok' }),
      'GET /api/conversations': (c) =>
        c.headers.authorization === 'Bearer tok'
          ? json([])
          : json({ error: { code: 'unauthorized', message: 'token' } }, 401),
    })
    const app = useApp()
    await app.init()
    expect(asked).toEqual(['missing'])
    expect(calls.filter((c) => c.url === '/api/conversations').map((c) => c.headers.authorization)).toEqual([
      undefined,
      'Bearer tok',
    ])
    expect(sessionStorage.getItem('planact.token')).toBe('tok')
    expect(app.error).toBeNull()
  })

  it('a 409 from POST is shown and leaves nothing running', async () => {
    mockFetch({
      'GET /api/health': () => json({ status: 'ok' }),
      'GET /api/conversations': () => json([]),
      'POST /api/agent/run': () =>
        json({ error: { code: 'conflict', message: 'A run is already active.' } }, 409),
    })
    const app = useApp()
    await app.init()
    await app.send('goal', 'auto', null)
    await until(() => app.error !== null, 'the error')
    expect(app.error).toBe('A run is already active.')
    expect(app.running).toBe(false)
  })
})
