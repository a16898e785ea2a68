// @vitest-environment jsdom
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createPinia, setActivePinia } from 'pinia'
import {
  applyFailed,
  applyProgress,
  applyUploaded,
  describeAttached,
  newAttachments,
  planUploads,
} from '../src/lib/attachments'
import { resolveWorkspacePath, rewriteWorkspaceLinks } from '../src/lib/links'
import { describeEntry } from '../src/lib/entries'
import { setToken } from '../src/lib/api'
import { renderMarkdown } from '../src/lib/markdown'
import { throttle, useApp } from '../src/stores/app'
import type { Message } from '../src/lib/types'
import { detailOf, summaryOf } from './fixtures'

function msg(action: string, content: string, status: Message['status'] = 'success'): Message {
  return {
    role: 'assistant',
    uuid: 'u',
    status,
    content,
    comments: '',
    memorized: '',
    timestamp: 0,
    type: '',
    conversation_id: 'c1',
    run_id: 'r1',
    seq: 1,
    meta: {
      pid: '',
      task_id: null,
      action_type: action,
      filepath: '',
      url: '',
      json: [],
      content: '',
      is_active: true,
    },
  }
}

describe('attachments', () => {
  it('spread progress over the chips of one upload, then mark them done with their paths', () => {
    const batch = newAttachments([
      { name: 'data.csv', size: 10 },
      { name: 'b.txt', size: 5 },
    ])
    expect(batch.map((a) => a.state)).toEqual(['uploading', 'uploading'])
    expect(batch[0].id).not.toBe(batch[1].id)
    applyProgress(batch, 50, 200)
    expect(batch.map((a) => a.progress)).toEqual([0.25, 0.25])
    applyUploaded(batch, [
      { filepath: 'in/data.csv', filename: 'data.csv', url: '/x', filesize: 10 },
      { filepath: 'in/b.txt', filename: 'b.txt', url: '/y', filesize: 5 },
    ])
    expect(batch.map((a) => [a.state, a.filepath, a.progress])).toEqual([
      ['done', 'in/data.csv', 1],
      ['done', 'in/b.txt', 1],
    ])
    expect(describeAttached(batch)).toBe('Attached: in/data.csv, in/b.txt')
  })

  it('failures carry the server message; over the limit is refused before sending', () => {
    const batch = newAttachments([{ name: 'a', size: 1 }])
    applyFailed(batch, 'too big')
    expect(batch[0]).toMatchObject({ state: 'failed', error: 'too big' })
    const MB = 1024 * 1024
    const drop = [
      { name: 'huge.bin', size: 3 * MB },
      { name: 'a', size: 1.5 * MB },
      { name: 'b', size: 1.5 * MB },
      { name: 'c', size: 10 },
    ]
    const plan = planUploads(drop, 2)
    // the oversized file is refused alone; the small ones still go, each request under 2 MB
    expect(plan.refused.map((r) => r.file.name)).toEqual(['huge.bin'])
    expect(plan.refused[0].reason).toContain('huge.bin')
    expect(plan.batches.map((b) => b.map((f) => f.name))).toEqual([['a'], ['b', 'c']])
    expect(planUploads([{ name: 'ok', size: 10 }], undefined)).toEqual({
      refused: [],
      batches: [[{ name: 'ok', size: 10 }]],
    })
  })
})

describe('workspace links in Markdown', () => {
  it('resolve relative paths from the file, never outside the workspace', () => {
    expect(resolveWorkspacePath('report/README.md', 'chart.svg')).toBe('report/chart.svg')
    expect(resolveWorkspacePath('report/README.md', './img/a b.png')).toBe('report/img/a b.png')
    expect(resolveWorkspacePath('report/README.md', 'img/a%20b.png')).toBe('report/img/a b.png')
    expect(resolveWorkspacePath('report/README.md', '../data.csv')).toBe('data.csv')
    expect(resolveWorkspacePath('README.md', '/out/x.png')).toBe('out/x.png')
    expect(resolveWorkspacePath('', 'chart.svg#top')).toBe('chart.svg')
    expect(resolveWorkspacePath('README.md', '../../etc/passwd')).toBeNull()
    expect(resolveWorkspacePath('README.md', 'https://example.com/a.png')).toBeNull()
    expect(resolveWorkspacePath('README.md', 'data:image/png;base64,AAAA')).toBeNull()
    expect(resolveWorkspacePath('README.md', 'javascript:alert(1)')).toBeNull()
    expect(resolveWorkspacePath('README.md', '//evil.example/x.png')).toBeNull()
    expect(resolveWorkspacePath('README.md', '#section')).toBeNull()
  })

  it('point images at the confined download route and mark workspace links', () => {
    setToken('tok')
    const root = document.createElement('div')
    root.innerHTML = renderMarkdown(
      '![chart](chart.svg) [data](../data.csv) [web](https://example.com) ![x](../../x.png)',
    )
    rewriteWorkspaceLinks(root, 'c1', 'report/README.md')
    const imgs = root.querySelectorAll('img')
    expect(imgs[0].getAttribute('src')).toBe('/api/files/c1/report/chart.svg?access_token=tok')
    expect(imgs[1].getAttribute('src')).toBe('../../x.png') // left alone: it leaves the workspace
    const links = root.querySelectorAll('a')
    expect(links[0].dataset.workspacePath).toBe('data.csv')
    expect(links[0].getAttribute('href')).toBe('/api/files/c1/data.csv?access_token=tok')
    expect(links[1].dataset.workspacePath).toBeUndefined()
    expect(links[1].getAttribute('href')).toBe('https://example.com')
    setToken(null)
  })
})

describe('entry cards', () => {
  it('a 25-line file is 25 lines, not 26', () => {
    const text = Array.from({ length: 25 }, (_, i) => `row ${i}`).join('\n') + '\n'
    const d = describeEntry(msg('read_file', text))
    expect(d.lines).toBe(25)
    expect(describeEntry(msg('read_file', 'one line')).lines).toBe(1)
  })
})

describe('throttle', () => {
  beforeEach(() => vi.useFakeTimers())
  afterEach(() => vi.useRealTimers())
  it('calls at once, then at most once per interval, the last call landing', () => {
    let n = 0
    const t = throttle(() => n++, 1000)
    t()
    expect(n).toBe(1)
    t()
    t()
    expect(n).toBe(1)
    vi.advanceTimersByTime(1000)
    expect(n).toBe(2)
    vi.advanceTimersByTime(5000)
    expect(n).toBe(2)
  })
})

const json = (v: unknown, status = 200) =>
  new Response(JSON.stringify(v), { status, headers: { 'Content-Type': 'application/json' } })

describe('store: settings, model check, rename, search, retry', () => {
  const calls: { method: string; url: string; headers: Record<string, string>; body: unknown }[] = []
  beforeEach(() => {
    setActivePinia(createPinia())
    setToken(null)
    calls.length = 0
    window.history.replaceState(null, '', '/')
    vi.stubGlobal('fetch', async (url: string, init: RequestInit = {}) => {
      const headers: Record<string, string> = {}
      new Headers(init.headers).forEach((v, k) => (headers[k] = v))
      const method = init.method ?? 'GET'
      calls.push({ method, url, headers, body: init.body ? JSON.parse(String(init.body)) : undefined })
      const key = `${method} ${url}`
      if (key === 'GET /api/settings')
        return json({ model: 'a/one', models: ['a/one', 'b/two'], runtimes: ['local'], auth: false })
      if (key === 'GET /api/health') return json({ status: 'ok', runtimes: ['local'] })
      if (key === 'GET /api/conversations') return json([summaryOf({ title: 'old' })])
      if (key === 'GET /api/conversations?q=sales') return json([])
      if (key === 'POST /api/llm/check')
        return json({ ok: false, latency_ms: 12, error: 'The provider rejected the key.' })
      if (key === 'PATCH /api/conversations/c1') return json(detailOf({ title: 'New' }))
      if (key === 'POST /api/agent/runs/r9/retry')
        return new Response('event: end\ndata: {"conversation_id":"c1","run_id":"r10","status":"completed"}\n\n', {
          status: 200,
          headers: { 'X-Run-Id': 'r10', 'X-Conversation-Id': 'c1' },
        })
      if (key.startsWith('GET /api/conversations/c1')) return json(detailOf({ status: 'completed' }))
      return json({ error: { message: `no route ${key}` } }, 404)
    })
  })
  afterEach(() => vi.unstubAllGlobals())

  it('loads the models, checks the picked one and sends JSON with its content type', async () => {
    const app = useApp()
    await app.init()
    expect(app.model).toBe('a/one')
    expect(app.models).toEqual(['a/one', 'b/two'])
    expect(app.needsSetup).toBe(false)
    app.model = 'b/two'
    await app.checkModel()
    const post = calls.find((c) => c.url === '/api/llm/check')!
    expect(post.body).toEqual({ model: 'b/two' })
    expect(post.headers['content-type']).toBe('application/json')
    expect(app.check).toMatchObject({ ok: false, error: 'The provider rejected the key.' })
  })

  it('renames, searches and retries', async () => {
    const app = useApp()
    await app.init()
    expect(await app.rename('c1', '  New ')).toBe(true)
    const patch = calls.find((c) => c.method === 'PATCH')!
    expect(patch.body).toEqual({ title: 'New' })
    expect(patch.headers['content-type']).toBe('application/json')
    expect(app.conversations[0].title).toBe('New')
    await app.search('sales')
    expect(app.conversations).toEqual([])
    app.retry('r9')
    for (let i = 0; i < 200 && app.running; i++) await new Promise((r) => setTimeout(r, 5))
    const retry = calls.find((c) => c.url === '/api/agent/runs/r9/retry')!
    expect(retry.method).toBe('POST')
    expect(retry.body).toEqual({ model: 'a/one' })
    expect(retry.headers['content-type']).toBe('application/json')
    expect(app.currentId).toBe('c1')
  })

  it('shows the first-run screen when no model is configured', async () => {
    vi.stubGlobal('fetch', async (url: string) =>
      url === '/api/settings'
        ? json({ model: null, models: [], runtimes: ['local'], auth: false })
        : json([]),
    )
    const app = useApp()
    await app.init()
    expect(app.needsSetup).toBe(true)
  })
})
