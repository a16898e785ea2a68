// @vitest-environment jsdom
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createPinia, setActivePinia } from 'pinia'
import {
  checkText,
  isUnusedDraft,
  latestRunModel,
  modelsByRun,
  runModel,
  sidebarConversations,
} from '../src/lib/runmodel'
import { fullWhen, shortWhen } from '../src/lib/when'
import { setToken } from '../src/lib/api'
import { useApp } from '../src/stores/app'
import type { ConversationDetail, ConversationSummary } from '../src/lib/types'
import { detailOf, runOf, summaryOf } from './fixtures'

const detail: ConversationDetail = detailOf({
  status: 'completed',
  runs: [runOf({ run_id: 'r1', model: '' }), runOf({ run_id: 'r2', model: 'b/two' })],
})

function conv(id: string, title: string, status: ConversationSummary['status']): ConversationSummary {
  return summaryOf({ conversation_id: id, title, status })
}

describe('the model of each run', () => {
  it('is its own, or the server default when it named none', () => {
    expect(runModel(runOf({ model: 'b/two' }), 'a/one')).toBe('b/two')
    expect(runModel(runOf({ model: '' }), 'a/one')).toBe('a/one')
    expect(runModel(runOf({ model: null }), 'a/one')).toBe('a/one')
    expect(runModel(runOf(), null)).toBeNull()
    expect(modelsByRun(detail, 'a/one')).toEqual({ r1: 'a/one', r2: 'b/two' })
    expect(modelsByRun(null, 'a/one')).toEqual({})
  })

  it('the picker takes the latest run’s model, only when it is still offered', () => {
    expect(latestRunModel(detail, 'a/one', ['a/one', 'b/two'])).toBe('b/two')
    expect(latestRunModel(detail, 'a/one', ['a/one'])).toBeNull()
    expect(latestRunModel({ ...detail, runs: [] }, 'a/one', ['a/one'])).toBeNull()
    const onlyDefault = { ...detail, runs: [runOf({ model: '' })] }
    expect(latestRunModel(onlyDefault, 'a/one', ['a/one', 'b/two'])).toBe('a/one')
  })

  it('the check result names the model it checked', () => {
    expect(checkText({ ok: true, model: 'b/two', latency_ms: 1234 }, null)).toBe(
      'The model answered in 1.2 s (b/two).',
    )
    expect(checkText({ ok: true, model: null, latency_ms: 100 }, 'a/one')).toBe(
      'The model answered in 0.1 s (a/one).',
    )
    expect(checkText({ ok: false, model: 'b/two', latency_ms: 0, error: 'Bad key.' }, null)).toBe(
      'b/two: Bad key.',
    )
    expect(checkText({ ok: false, model: null, latency_ms: 0 }, null)).toBe('The model did not answer.')
    expect(checkText(null, 'a/one')).toBe('')
  })
})

describe('the sidebar', () => {
  it('leaves out untitled conversations that never ran, except the current one', () => {
    const list = [
      conv('a', '', 'idle'),
      conv('b', 'Named by hand', 'idle'),
      conv('c', 'Sent a goal', 'completed'),
      conv('d', '', 'idle'),
    ]
    expect(isUnusedDraft(list[0])).toBe(true)
    expect(isUnusedDraft(list[1])).toBe(false)
    expect(sidebarConversations(list, 'd').map((c) => c.conversation_id)).toEqual(['b', 'c', 'd'])
    expect(sidebarConversations(list, null).map((c) => c.conversation_id)).toEqual(['b', 'c'])
  })

  it('dates fit one line: the time today, day and month this year, the short date before', () => {
    const now = new Date(2026, 10, 24, 23, 30)
    expect(shortWhen(new Date(2026, 10, 24, 9, 5).toISOString(), now, 'en-GB')).toBe('09:05')
    expect(shortWhen(new Date(2026, 2, 3, 9, 5).toISOString(), now, 'en-GB')).toBe('3 Mar')
    expect(shortWhen(new Date(2025, 2, 3, 9, 5).toISOString(), now, 'en-GB')).toBe('03/03/2025')
    expect(shortWhen(Date.UTC(2026, 0, 1) / 1000, now, 'en-GB')).not.toBe('')
    expect(shortWhen('not a date', now)).toBe('')
    expect(fullWhen(new Date(2025, 2, 3, 9, 5).toISOString(), 'en-GB')).toContain('2025')
    expect(fullWhen('nope')).toBe('')
  })
})

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json' },
  })
}

describe('store: a conversation’s model and files', () => {
  let files: unknown[] = []
  beforeEach(() => {
    setActivePinia(createPinia())
    setToken(null)
    files = []
    window.history.replaceState(null, '', '/')
    vi.stubGlobal('fetch', async (url: string) => {
      if (url === '/api/settings')
        return json({ model: 'a/one', models: ['a/one', 'b/two'], runtimes: ['local'], auth: false })
      if (url === '/api/health') return json({ status: 'ok' })
      if (url === '/api/conversations') return json([conv('c1', 'Sent', 'completed')])
      if (url === '/api/conversations/c1') return json(detail)
      if (url === '/api/conversations/c1/messages') return json([])
      if (url === '/api/conversations/c1/files') return json(files)
      return json({ error: { message: `no route ${url}` } }, 404)
    })
  })
  afterEach(() => vi.unstubAllGlobals())

  it('opening a conversation puts its latest run’s model in the picker and names each run’s', async () => {
    const app = useApp()
    await app.init()
    expect(app.model).toBe('a/one')
    await app.openConversation('c1')
    expect(app.model).toBe('b/two')
    expect(app.runModels).toEqual({ r1: 'a/one', r2: 'b/two' })
  })

  it('offers the zip only once the workspace has files', async () => {
    const app = useApp()
    await app.init()
    await app.openConversation('c1')
    await vi.waitFor(() => expect(app.fileCount).toBe(0))
    expect(app.hasFiles).toBe(false)
    files = [{ filepath: 'a.txt', filename: 'a.txt', url: '/x', filesize: 2 }]
    await app.refreshDetail()
    await vi.waitFor(() => expect(app.hasFiles).toBe(true))
    app.newConversation()
    expect(app.hasFiles).toBe(false)
  })
})

describe('store: files picked while the page loads', () => {
  afterEach(() => vi.unstubAllGlobals())

  it('wait for the upload limit, so an oversized one is refused alone', async () => {
    setActivePinia(createPinia())
    setToken(null)
    window.history.replaceState(null, '', '/')
    let release: () => void = () => {}
    const settingsArrive = new Promise<void>((r) => (release = r))
    const calls: string[] = []
    vi.stubGlobal('fetch', async (url: string, init: RequestInit = {}) => {
      calls.push(`${init.method ?? 'GET'} ${url}`)
      if (url === '/api/settings') {
        await settingsArrive
        return json({ model: 'a/one', models: ['a/one'], runtimes: ['local'], auth: false, upload_max_mb: 0.001 })
      }
      if (url === '/api/conversations' && init.method === 'POST') return json({ conversation_id: 'c9' }, 201)
      return json([])
    })
    const app = useApp()
    const started = app.init()
    const attached = app.attach([new File(['x'.repeat(5000)], 'big.bin')])
    release()
    await Promise.all([started, attached])
    expect(app.attachments).toHaveLength(1)
    expect(app.attachments[0].state).toBe('failed')
    expect(app.attachments[0].error).toContain('upload limit')
    expect(calls).not.toContain('POST /api/conversations') // nothing to upload, nothing made
  })
})
