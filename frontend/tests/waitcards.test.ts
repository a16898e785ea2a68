// @vitest-environment jsdom
// The approval and question cards mounted as the app mounts them (EntryView inside the app's
// store), with fetch stubbed at the network boundary.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createApp, defineComponent, h, nextTick, type App as VueApp } from 'vue'
import { createPinia, setActivePinia } from 'pinia'
import EntryView from '../src/components/EntryView.vue'
import { useApp } from '../src/stores/app'
import { buildView, reduce } from '../src/lib/reducer'
import type { Message } from '../src/lib/types'
import { msg, resetSeq } from './fixtures'

interface Call {
  method: string
  url: string
  body: unknown
}

type Handler = (call: Call) => Response | Promise<Response>

const json = (v: unknown, status = 200) =>
  new Response(JSON.stringify(v), { status, headers: { 'Content-Type': 'application/json' } })

function mockFetch(routes: Record<string, Handler>): Call[] {
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

/** a promise the test resolves: the server's answer held until then */
function held<T>(): { promise: Promise<T>; release: (v: T) => void } {
  let release!: (v: T) => void
  const promise = new Promise<T>((r) => (release = r))
  return { promise, release }
}

async function until(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (pred()) return
    await new Promise((r) => setTimeout(r, 5))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const TASK = { id: '1', title: 'Make the marker', description: '', requirement: '', status: 'running' }

function approvalOf(content: string, action: string, cls: string, params: Record<string, unknown>, filepath = '') {
  return msg('approval', content, {
    status: 'running',
    meta: { task_id: '1', filepath, json: [{ action_type: action, class: cls, params }] },
  })
}

function runWith(waitMsg: () => Message): Message[] {
  const question = msg('question', 'make a marker')
  const plan = msg('plan', '', { meta: { json: [{ ...TASK, status: 'pending' }] } })
  const task = msg('task', '', { status: 'running', meta: { task_id: '1', json: [TASK] } })
  return [question, plan, task, waitMsg()]
}

function partner(of: Message, status: 'success' | 'failure', content: string): Message {
  return { ...msg(of.meta.action_type, content, { status, meta: { ...of.meta } }), uuid: of.uuid }
}

let mounted: VueApp | null = null
let root: HTMLElement

/** Mount the task's entry for ``uuid`` from the store's view, as PlanView does. */
function mountEntry(uuid: string, finished = false): ReturnType<typeof useApp> {
  const store = useApp()
  const Host = defineComponent({
    setup() {
      return () => {
        const m = store.view.turns[0]?.tasks?.[0]?.entries.find((e) => e.uuid === uuid)
        return m ? h(EntryView, { message: m, conversationId: 'c1', finished }) : null
      }
    },
  })
  root = document.createElement('div')
  document.body.appendChild(root)
  mounted = createApp(Host)
  mounted.use(pinia)
  mounted.mount(root)
  return store
}

const $ = (testid: string) => root.querySelector<HTMLElement>(`[data-testid="${testid}"]`)
const button = (testid: string) => $(testid) as HTMLButtonElement

let pinia: ReturnType<typeof createPinia>

beforeEach(() => {
  resetSeq()
  pinia = createPinia()
  setActivePinia(pinia)
})

afterEach(() => {
  mounted?.unmount()
  mounted = null
  document.body.innerHTML = ''
  vi.unstubAllGlobals()
})

describe('approval card', () => {
  it('shows the command and its class; a double click approves once; the answer shows approved', async () => {
    const run = runWith(() => approvalOf('touch marker', 'terminal_run', 'terminal', { command: 'touch marker' }))
    const answer = held<Response>()
    const calls = mockFetch({ 'POST /api/agent/runs/r1/approvals/u4': () => answer.promise })
    const store = mountEntry('u4')
    store.view = buildView(run)
    await nextTick()
    const card = $('approval-card')!
    expect(card.dataset.state).toBe('pending')
    expect($('approval-command')!.textContent).toBe('$ touch marker')
    expect($('approval-class')!.textContent).toBe('terminal')
    expect(button('approve-all').textContent!.trim()).toBe('Approve all commands')
    button('approve').click()
    button('approve').click()
    await nextTick()
    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(1)
    expect(calls[0].body).toEqual({ decision: 'approve' })
    expect(card.dataset.state).toBe('sending')
    for (const b of ['approve', 'reject', 'approve-all']) expect(button(b).disabled).toBe(true)
    answer.release(json({ decision: 'approve' }))
    await new Promise((r) => setTimeout(r, 0)) // the 200 is read
    // accepted, but the run has not said so yet: still no second click
    expect(card.dataset.state).toBe('sending')
    expect(button('approve').disabled).toBe(true)
    // the run's answer message arrives on the stream
    reduce(store.view, partner(run[3], 'success', 'Approved'))
    await nextTick()
    expect(card.dataset.state).toBe('approved')
    expect($('approval-outcome')!.textContent).toContain('Approved')
    expect($('approve')).toBeNull()
    expect($('approval-command')!.textContent).toBe('$ touch marker') // still what was approved
  })

  it('reject opens a reason field; Enter sends the reason; the card shows it', async () => {
    const run = runWith(() => approvalOf('rm -rf build', 'terminal_run', 'terminal', { command: 'rm -rf build' }))
    const calls = mockFetch({ 'POST /api/agent/runs/r1/approvals/u4': () => json({ decision: 'reject' }) })
    const store = mountEntry('u4')
    store.view = buildView(run)
    await nextTick()
    expect($('reject-reason')).toBeNull()
    button('reject').click()
    await nextTick()
    const box = $('reject-reason') as HTMLTextAreaElement
    expect(document.activeElement).toBe(box)
    expect(box.maxLength).toBe(4000)
    box.value = 'keep the build, it took an hour'
    box.dispatchEvent(new Event('input'))
    box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }))
    box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }))
    await until(() => calls.length > 0, 'the POST')
    expect(calls).toHaveLength(1)
    expect(calls[0].body).toEqual({ decision: 'reject', reason: 'keep the build, it took an hour' })
    reduce(store.view, partner(run[3], 'failure', 'keep the build, it took an hour'))
    await nextTick()
    expect($('approval-card')!.dataset.state).toBe('rejected')
    expect($('approval-reason')!.textContent).toBe('keep the build, it took an hour')
  })

  it('Escape closes the reason field without sending', async () => {
    const run = runWith(() => approvalOf('ls', 'terminal_run', 'terminal', { command: 'ls' }))
    const calls = mockFetch({})
    const store = mountEntry('u4')
    store.view = buildView(run)
    await nextTick()
    button('reject').click()
    await nextTick()
    $('reject-reason')!.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }))
    await nextTick()
    expect($('reject-reason')).toBeNull()
    expect(calls).toHaveLength(0)
  })

  it('approve all names the class and says so once answered', async () => {
    const diff = '--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n import os\n-print(1)\n+print(2)\n'
    const run = runWith(() => approvalOf(diff, 'edit_file', 'edits', { path: 'app.py' }, 'app.py'))
    const calls = mockFetch({ 'POST /api/agent/runs/r1/approvals/u4': () => json({ decision: 'approve_all' }) })
    const store = mountEntry('u4')
    store.view = buildView(run)
    await nextTick()
    const lines = [...root.querySelectorAll<HTMLElement>('[data-testid="approval-diff"] .diff-line')]
    expect(lines.map((l) => l.dataset.kind)).toEqual(['file', 'file', 'hunk', 'ctx', 'del', 'add'])
    expect(lines[5].textContent).toBe('+print(2)\n')
    expect($('approval-file')!.textContent!.trim()).toBe('app.py')
    expect(button('approve-all').textContent!.trim()).toBe('Approve all file edits')
    button('approve-all').click()
    await until(() => calls.length > 0, 'the POST')
    expect(calls[0].body).toEqual({ decision: 'approve_all' })
    reduce(store.view, partner(run[3], 'success', 'Approved, with every later edits action of this run'))
    await nextTick()
    expect($('approval-outcome')!.textContent).toContain('every later file edit of this run')
  })

  it('a 409 says it was already answered and fetches the answer, with no error banner', async () => {
    const run = runWith(() => approvalOf('touch marker', 'terminal_run', 'terminal', { command: 'touch marker' }))
    const answered = partner(run[3], 'success', 'Approved')
    const calls = mockFetch({
      'POST /api/agent/runs/r1/approvals/u4': () =>
        json({ error: { code: 'conflict', message: 'That approval is no longer pending.' } }, 409),
      'GET /api/conversations/c1/messages': () => json([...run, answered]),
    })
    const store = mountEntry('u4')
    store.currentId = 'c1'
    store.view = buildView(run)
    await nextTick()
    button('approve').click()
    await until(() => $('approval-card')!.dataset.state === 'approved', 'the answer given elsewhere')
    expect($('approval-note')!.textContent).toBe('This was already answered.')
    expect($('approval-error')).toBeNull()
    expect(store.error).toBeNull()
    expect(calls.map((c) => `${c.method} ${c.url}`)).toEqual([
      'POST /api/agent/runs/r1/approvals/u4',
      'GET /api/conversations/c1/messages',
    ])
  })

  it('another error is said in the card and the buttons work again', async () => {
    const run = runWith(() => approvalOf('ls', 'terminal_run', 'terminal', { command: 'ls' }))
    mockFetch({
      'POST /api/agent/runs/r1/approvals/u4': () =>
        json({ error: { code: 'invalid_request', message: 'The reason is too long.' } }, 400),
    })
    const store = mountEntry('u4')
    store.view = buildView(run)
    await nextTick()
    button('approve').click()
    await until(() => $('approval-error') !== null, 'the error')
    expect($('approval-error')!.textContent).toBe('The reason is too long.')
    expect(button('approve').disabled).toBe(false)
    expect($('approval-card')!.dataset.state).toBe('pending')
  })

  it('after a reload shows what was asked and how it ended, with no buttons', async () => {
    const run = runWith(() => approvalOf('touch marker', 'terminal_run', 'terminal', { command: 'touch marker' }))
    const store = mountEntry('u4', true)
    store.view = buildView([...run, partner(run[3], 'failure', 'Nobody approved it within 1800 seconds (APPROVAL_TIMEOUT), so it was not done.')])
    await nextTick()
    expect($('approval-card')!.dataset.state).toBe('timed_out')
    expect($('approval-command')!.textContent).toBe('$ touch marker')
    expect($('approval-outcome')!.textContent).toContain('Timed out')
    expect($('approve')).toBeNull()
  })

  it('an approval left unanswered by a run that ended offers no buttons', async () => {
    const run = runWith(() => approvalOf('ls', 'terminal_run', 'terminal', { command: 'ls' }))
    const store = mountEntry('u4', true)
    store.view = buildView(run)
    await nextTick()
    expect($('approval-card')!.dataset.state).toBe('interrupted')
    expect($('approve')).toBeNull()
  })
})

describe('question card', () => {
  it('shows the question; Enter sends the answer once; the answer is shown under the question', async () => {
    const run = runWith(() => msg('ask_user', 'Which **port** should the server use?', { status: 'running', meta: { task_id: '1' } }))
    const calls = mockFetch({ 'POST /api/agent/runs/r1/answers/u4': () => json({ answer: '8080' }) })
    const store = mountEntry('u4')
    store.view = buildView(run)
    await nextTick()
    expect($('question-text')!.textContent!.trim()).toBe('Which port should the server use?')
    expect($('question-text')!.querySelector('strong')!.textContent).toBe('port')
    const send = button('send-answer')
    expect(send.disabled).toBe(true) // nothing typed
    const box = $('answer-input') as HTMLTextAreaElement
    box.value = '  8080 '
    box.dispatchEvent(new Event('input'))
    box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }))
    box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }))
    await until(() => calls.length > 0, 'the POST')
    expect(calls).toHaveLength(1)
    expect(calls[0].body).toEqual({ answer: '8080' })
    reduce(store.view, partner(run[3], 'success', '8080'))
    await nextTick()
    expect($('question-card')!.dataset.state).toBe('answered')
    expect($('answer')!.textContent).toBe('8080')
    expect($('question-text')!.textContent!.trim()).toBe('Which port should the server use?')
    expect($('answer-input')).toBeNull()
  })

  it('Shift+Enter is a new line, not a send', async () => {
    const run = runWith(() => msg('ask_user', 'Why?', { status: 'running', meta: { task_id: '1' } }))
    const calls = mockFetch({})
    const store = mountEntry('u4')
    store.view = buildView(run)
    await nextTick()
    const box = $('answer-input') as HTMLTextAreaElement
    box.value = 'because'
    box.dispatchEvent(new Event('input'))
    box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', shiftKey: true, bubbles: true }))
    await nextTick()
    expect(calls).toHaveLength(0)
  })

  it('a 409 says it was already answered', async () => {
    const run = runWith(() => msg('ask_user', 'Why?', { status: 'running', meta: { task_id: '1' } }))
    mockFetch({
      'POST /api/agent/runs/r1/answers/u4': () => json({ error: { message: 'not pending' } }, 409),
      'GET /api/conversations/c1/messages': () => json([...run, partner(run[3], 'success', 'because')]),
    })
    const store = mountEntry('u4')
    store.currentId = 'c1'
    store.view = buildView(run)
    await nextTick()
    const box = $('answer-input') as HTMLTextAreaElement
    box.value = 'mine'
    box.dispatchEvent(new Event('input'))
    await nextTick()
    button('send-answer').click()
    await until(() => $('question-card')!.dataset.state === 'answered', 'the answer given elsewhere')
    expect($('question-note')!.textContent).toBe('This was already answered.')
    expect($('answer')!.textContent).toBe('because')
    expect(store.error).toBeNull()
  })
})
