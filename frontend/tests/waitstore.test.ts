// @vitest-environment jsdom
// The approval mode (picker, sent with each run, shown again after a reload) and a waiting run
// in the app: the live view, the sidebar, the page title. fetch is stubbed at the boundary.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createApp, nextTick, type App as VueApp } from 'vue'
import { createPinia, setActivePinia } from 'pinia'
import ApprovalPicker from '../src/components/ApprovalPicker.vue'
import App from '../src/App.vue'
import { useApp } from '../src/stores/app'
import { useWaits } from '../src/stores/waits'
import { turnStatus } from '../src/lib/reducer'
import type { EndEvent, Message } from '../src/lib/types'
import { detailOf, msg, resetSeq, runOf, summaryOf } from './fixtures'

interface Call {
  method: string
  url: string
  body: unknown
}

const json = (v: unknown, status = 200) =>
  new Response(JSON.stringify(v), { status, headers: { 'Content-Type': 'application/json' } })

function mockFetch(routes: Record<string, (c: Call) => Response | Promise<Response>>): Call[] {
  const calls: Call[] = []
  vi.stubGlobal('fetch', async (input: string, init: RequestInit = {}) => {
    const call: Call = {
      method: init.method ?? 'GET',
      url: input,
      body: init.body ? JSON.parse(String(init.body)) : undefined,
    }
    calls.push(call)
    const h = routes[`${call.method} ${input.split('?')[0]}`]
    return h ? h(call) : json({ error: { message: `no route ${call.url}` } }, 404)
  })
  return calls
}

const frame = (m: Message) => `id: ${m.seq}\nevent: message\ndata: ${JSON.stringify(m)}\n\n`

/** an event stream the test writes to */
function liveStream(): { response: Response; push: (text: string) => void; close: () => void } {
  let ctrl!: ReadableStreamDefaultController<Uint8Array>
  const body = new ReadableStream<Uint8Array>({ start: (c) => void (ctrl = c) })
  const enc = new TextEncoder()
  return {
    response: new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } }),
    push: (text) => ctrl.enqueue(enc.encode(text)),
    close: () => ctrl.close(),
  }
}

async function until(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (pred()) return
    await new Promise((r) => setTimeout(r, 5))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const MODES = { approval: 'never', approval_modes: ['never', 'risky', 'always'] }
const SETTINGS = { model: 'm', models: ['m'], runtimes: ['local'], auth: false }

let mounted: VueApp | null = null
let pinia: ReturnType<typeof createPinia>

function mount(component: Parameters<typeof createApp>[0]): HTMLElement {
  const root = document.createElement('div')
  document.body.appendChild(root)
  mounted = createApp(component)
  mounted.use(pinia)
  mounted.mount(root)
  return root
}

beforeEach(() => {
  resetSeq()
  pinia = createPinia()
  setActivePinia(pinia)
  window.history.replaceState(null, '', '/')
})
afterEach(() => {
  mounted?.unmount()
  mounted = null
  document.body.innerHTML = ''
  vi.unstubAllGlobals()
  vi.useRealTimers()
})

describe('the approval mode', () => {
  it('is picked beside the model, explained, and sent with the run', async () => {
    const end: EndEvent = { conversation_id: 'c1', run_id: 'r1', status: 'completed' }
    const calls = mockFetch({
      'GET /api/health': () => json({ status: 'ok' }),
      'GET /api/settings': () => json({ ...SETTINGS, ...MODES, approval: 'risky' }),
      'GET /api/conversations': () => json([]),
      'GET /api/conversations/c1': () => json(detailOf({ status: 'completed' })),
      'POST /api/agent/run': () =>
        new Response(`event: end\ndata: ${JSON.stringify(end)}\n\n`, {
          status: 200,
          headers: { 'X-Run-Id': 'r1', 'X-Conversation-Id': 'c1' },
        }),
    })
    const app = useApp()
    await app.loadSettings()
    const root = mount(ApprovalPicker)
    await nextTick()
    const select = root.querySelector<HTMLSelectElement>('select[aria-label="Approval"]')!
    expect(select.value).toBe('risky') // the server default
    expect([...select.options].map((o) => o.value)).toEqual(['never', 'risky', 'always'])
    // the open list explains each mode (its group's label); the closed select stays short
    expect([...select.querySelectorAll('optgroup')].map((g) => g.label)).toEqual([
      'Never ask: actions run at once',
      'Ask before commands, web and MCP tools',
      'Ask before every action, file edits too',
    ])
    expect(select.options[2].textContent).toBe('always')
    select.value = 'always'
    select.dispatchEvent(new Event('change'))
    await app.send('make a marker', 'agent', null, useWaits().approvalForRun())
    await until(() => !app.running, 'the run')
    const post = calls.find((c) => c.method === 'POST')!
    expect(post.body).toEqual({ goal: 'make a marker', mode: 'agent', approval: 'always' })
  })

  it('an older server offers no modes: no picker, nothing sent', async () => {
    const calls = mockFetch({
      'GET /api/settings': () => json(SETTINGS),
      'POST /api/agent/run': () => json({ error: { message: 'stop here' } }, 409),
    })
    const app = useApp()
    await app.loadSettings()
    const root = mount(ApprovalPicker)
    await nextTick()
    expect(root.querySelector('select')).toBeNull()
    await app.send('goal', 'auto', null, useWaits().approvalForRun())
    await until(() => app.error !== null, 'the 409')
    expect(calls.find((c) => c.method === 'POST')!.body).toEqual({ goal: 'goal', mode: 'auto' })
  })

  it('a reopened conversation shows the mode its latest run ran with', async () => {
    mockFetch({
      'GET /api/settings': () => json({ ...SETTINGS, ...MODES }),
      'GET /api/conversations/c1': () =>
        json(
          detailOf({
            status: 'completed',
            runs: [runOf({ run_id: 'r0', approval: 'never' }), runOf({ approval: 'always' })],
          }),
        ),
      'GET /api/conversations/c1/messages': () => json([]),
      'GET /api/conversations/c1/files': () => json([]),
    })
    const app = useApp()
    const waits = useWaits()
    await app.loadSettings()
    expect(waits.approval).toBe('never')
    await app.openConversation('c1')
    await until(() => waits.approval === 'always', 'the run’s mode')
    // a later refresh of the same conversation does not undo a new pick
    waits.approval = 'risky'
    await app.refreshDetail()
    await nextTick()
    expect(waits.approval).toBe('risky')
  })
})

describe('a waiting run', () => {
  it('reopened while parked: followed, marked waiting in the view, the sidebar and the title; running again once answered', async () => {
    const question = msg('question', 'make a marker')
    const approval = msg('approval', 'touch marker', {
      status: 'running',
      meta: { json: [{ action_type: 'terminal_run', class: 'terminal', params: { command: 'touch marker' } }] },
    })
    const stream = liveStream()
    window.history.replaceState(null, '', '/#/c/c1')
    mockFetch({
      'GET /api/health': () => json({ status: 'ok' }),
      'GET /api/settings': () => json({ ...SETTINGS, ...MODES }),
      // a list fetched a moment before the run parked: the page knows better
      'GET /api/conversations': () =>
        json([summaryOf({ title: 'Marker', status: 'running' })]),
      'GET /api/conversations/c1': () =>
        json(
          detailOf({
            title: 'Marker',
            status: 'waiting',
            runs: [runOf({ status: 'waiting', approval: 'always' })],
          }),
        ),
      'GET /api/conversations/c1/messages': () => json([question, approval]),
      'GET /api/conversations/c1/files': () => json([]),
      'GET /api/agent/runs/r1/events': () => stream.response,
    })
    const root = mount(App)
    const app = useApp()
    const waits = useWaits()
    await until(() => app.activeRunId === 'r1' && app.connection === 'live', 'the waiting run followed')
    expect(waits.waiting).toBe(true)
    expect(turnStatus(app.view.turns[0])).toBe('waiting')
    await nextTick()
    expect(document.title).toBe('⏸ Waiting for you · Marker — planact')
    expect(root.querySelector('[data-testid="waiting"]')).not.toBeNull()
    expect(root.querySelector('[data-testid="working"]')).toBeNull()
    expect(root.querySelector('[data-testid="conversation-status"]')!.getAttribute('data-status')).toBe('waiting')
    const badge = root.querySelector('[data-testid="conversation-list"] .badge')!
    expect(badge.getAttribute('data-status')).toBe('waiting')
    expect(root.querySelector('[data-testid="approval-card"] [data-testid="approve"]')).not.toBeNull()
    expect(root.querySelector<HTMLSelectElement>('[data-testid="approval-mode"]')!.value).toBe('always')

    // the answer (given anywhere) comes on the stream: the run works again
    stream.push(frame({ ...msg('approval', 'Approved', { status: 'success', meta: approval.meta }), uuid: approval.uuid }))
    await until(() => !waits.waiting, 'the answer')
    await nextTick()
    expect(document.title).toBe('● Marker — planact')
    expect(root.querySelector('[data-testid="working"]')).not.toBeNull()
    expect(root.querySelector('[data-testid="conversation-status"]')!.getAttribute('data-status')).toBe('running')
    expect(root.querySelector('[data-testid="conversation-list"] .badge')!.getAttribute('data-status')).toBe('running')
    expect(root.querySelector('[data-testid="approval-card"]')!.getAttribute('data-state')).toBe('approved')
    stream.push(`event: end\ndata: ${JSON.stringify({ conversation_id: 'c1', run_id: 'r1', status: 'completed' })}\n\n`)
    stream.close()
    await until(() => !app.running, 'the end')
  })
})
