// HTTP client: relative /api URLs, bearer token from sessionStorage, one token prompt on 401.

import { errorFromResponse, HttpError } from './sse'
import type {
  ConversationDetail,
  ConversationSummary,
  FileInfo,
  Health,
  Message,
  Mode,
  ModelCheck,
  ServerSettings,
} from './types'
import type { McpServerInfo } from './mcpservers'

const TOKEN_KEY = 'planact.token'

let tokenCache: string | null = null

export function getToken(): string | null {
  if (tokenCache !== null) return tokenCache || null
  try {
    tokenCache = sessionStorage.getItem(TOKEN_KEY) ?? ''
  } catch {
    tokenCache = ''
  }
  return tokenCache || null
}

export function setToken(token: string | null): void {
  tokenCache = token ?? ''
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token)
    else sessionStorage.removeItem(TOKEN_KEY)
  } catch {
    /* storage unavailable: keep it in memory */
  }
}

/** Asked when the API answers 401; resolves with a token (or null if the user gave up). */
export type TokenAsker = (reason: 'missing' | 'wrong') => Promise<string | null>

let asker: TokenAsker | null = null
let pendingAsk: Promise<string | null> | null = null

export function setTokenAsker(fn: TokenAsker): void {
  asker = fn
}

async function askToken(): Promise<string | null> {
  if (!asker) return null
  if (!pendingAsk) {
    const reason = getToken() ? 'wrong' : 'missing'
    pendingAsk = asker(reason).finally(() => {
      pendingAsk = null
    })
  }
  const t = await pendingAsk
  if (t) setToken(t)
  return t
}

export function authHeaders(): Record<string, string> {
  const t = getToken()
  return t ? { Authorization: `Bearer ${t}` } : {}
}

/** Add ?access_token= for plain links (downloads) the browser fetches itself. */
export function withToken(url: string): string {
  const t = getToken()
  if (!t) return url
  return url + (url.includes('?') ? '&' : '?') + 'access_token=' + encodeURIComponent(t)
}

/** fetch with auth; on 401 asks for a token once and retries. */
export async function apiFetch(path: string, init: RequestInit = {}): Promise<Response> {
  for (let tries = 0; ; tries++) {
    const headers = new Headers(init.headers)
    for (const [k, v] of Object.entries(authHeaders())) headers.set(k, v)
    const res = await fetch(path, { ...init, headers })
    if (res.status !== 401 || tries >= 3) return res
    const token = await askToken()
    if (!token) return res
  }
}

async function json<T>(path: string, init: RequestInit = {}): Promise<T> {
  const res = await apiFetch(path, init)
  if (!res.ok) throw await errorFromResponse(res)
  return (await res.json()) as T
}

export function encodePath(p: string): string {
  return p
    .split('/')
    .filter((s) => s !== '' && s !== '.')
    .map(encodeURIComponent)
    .join('/')
}

export function fileUrl(conversationId: string, filepath: string): string {
  return `/api/files/${encodeURIComponent(conversationId)}/${encodePath(filepath)}`
}

export function zipUrl(conversationId: string): string {
  return `/api/conversations/${encodeURIComponent(conversationId)}/files.zip`
}

const JSON_HEADERS = { 'Content-Type': 'application/json' }

/** POST/PATCH a JSON body (always with Content-Type: application/json). */
function sendJson<T>(path: string, method: string, body: unknown): Promise<T> {
  return json<T>(path, { method, headers: JSON_HEADERS, body: JSON.stringify(body ?? {}) })
}

export interface UploadProgress {
  loaded: number
  total: number
}

/** Upload files with XMLHttpRequest (fetch reports no upload progress). */
export function uploadFiles(
  conversationId: string,
  files: File[],
  opts: { dir?: string; onProgress?: (p: UploadProgress) => void; signal?: AbortSignal } = {},
): Promise<FileInfo[]> {
  const form = new FormData()
  if (opts.dir) form.append('dir', opts.dir)
  for (const f of files) form.append('file', f, f.name)
  const url = `/api/conversations/${encodeURIComponent(conversationId)}/files`
  const attempt = (): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest()
      xhr.open('POST', url)
      for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v)
      xhr.upload.onprogress = (e) => {
        if (e.lengthComputable) opts.onProgress?.({ loaded: e.loaded, total: e.total })
      }
      xhr.onload = () => resolve({ status: xhr.status, text: xhr.responseText })
      xhr.onerror = () => reject(new HttpError(0, 'The upload failed: the server did not answer.'))
      xhr.onabort = () => reject(new DOMException('Upload cancelled', 'AbortError'))
      opts.signal?.addEventListener('abort', () => xhr.abort(), { once: true })
      xhr.send(form)
    })
  return (async () => {
    for (let tries = 0; ; tries++) {
      const res = await attempt()
      if (res.status === 401 && tries < 2 && (await askToken())) continue
      if (res.status >= 200 && res.status < 300) return JSON.parse(res.text) as FileInfo[]
      throw await errorFromResponse(
        new Response(res.text, {
          status: res.status,
          headers: { 'Content-Type': 'application/json' },
        }),
      )
    }
  })()
}

export interface RunBody {
  goal: string
  conversation_id?: string
  mode?: Mode
  runtime?: string
  model?: string
  /** docs/api.md "Runs that wait for a person": when the run asks before acting */
  approval?: string
}

export const api = {
  health: () => json<Health>('/api/health'),
  settings: () => json<ServerSettings>('/api/settings'),
  mcpServers: () => json<McpServerInfo[]>('/api/mcp/servers'),
  checkModel: (model: string | null) =>
    sendJson<ModelCheck>('/api/llm/check', 'POST', model ? { model } : {}),
  conversations: (q = '') =>
    json<ConversationSummary[]>(
      q.trim() ? `/api/conversations?q=${encodeURIComponent(q.trim())}` : '/api/conversations',
    ),
  createConversation: (title = '') =>
    sendJson<{ conversation_id: string }>('/api/conversations', 'POST', title ? { title } : {}),
  renameConversation: (id: string, title: string) =>
    sendJson<ConversationDetail>(`/api/conversations/${encodeURIComponent(id)}`, 'PATCH', {
      title,
    }),
  conversation: (id: string) =>
    json<ConversationDetail>(`/api/conversations/${encodeURIComponent(id)}`),
  messages: (id: string) =>
    json<Message[]>(`/api/conversations/${encodeURIComponent(id)}/messages`),
  files: (id: string) => json<FileInfo[]>(`/api/conversations/${encodeURIComponent(id)}/files`),
  async deleteConversation(id: string): Promise<void> {
    const res = await apiFetch(`/api/conversations/${encodeURIComponent(id)}`, {
      method: 'DELETE',
    })
    if (!res.ok && res.status !== 404) throw await errorFromResponse(res)
  },
  async stop(runId: string): Promise<void> {
    const res = await apiFetch(`/api/agent/runs/${encodeURIComponent(runId)}/stop`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{}',
    })
    if (!res.ok && res.status !== 409) throw await errorFromResponse(res)
  },
  /** POST the goal; the answer is the event stream. */
  /** Run a failed or stopped run's goal again; the answer is the new run's stream. */
  retry(runId: string, model: string | null, signal?: AbortSignal): Promise<Response> {
    return apiFetch(`/api/agent/runs/${encodeURIComponent(runId)}/retry`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, Accept: 'text/event-stream' },
      body: JSON.stringify(model ? { model } : {}),
      signal,
    })
  },
  startRun(
    body: RunBody,
    signal?: AbortSignal,
  ): Promise<Response> {
    return apiFetch('/api/agent/run', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify(body),
      signal,
    })
  },
  events(runId: string, after: number | null, signal?: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { Accept: 'text/event-stream' }
    let url = `/api/agent/runs/${encodeURIComponent(runId)}/events`
    if (after !== null && after > 0) {
      headers['Last-Event-ID'] = String(after)
      url += `?after=${after}`
    }
    return apiFetch(url, { headers, signal, cache: 'no-store' })
  },
  /** Fetch one workspace file for preview. */
  async fileBlob(conversationId: string, filepath: string): Promise<Blob> {
    const res = await apiFetch(fileUrl(conversationId, filepath))
    if (!res.ok) throw await errorFromResponse(res)
    return await res.blob()
  },
}

export { HttpError }
