// Checkpoints of a conversation's workspace (docs/api.md "Every step is a place to go back
// to"): list, compare, rewind, fork, share; and the read-only shared view's data.

import { apiFetch } from './api'
import { errorFromResponse } from './sse'
import type { Message } from './types'

export interface Checkpoint {
  seq: number
  run_id: string
  created_at: string | null
  label: string
  files_changed: number
}

export interface FileChange {
  path: string
  change: 'added' | 'removed' | 'changed'
  kind: 'text' | 'binary' | 'link'
  diff?: string | null
}

export interface CheckpointDiff {
  from: number
  to: number | null
  files: FileChange[]
}

export interface ShareLink {
  url: string
  token: string
}

export interface SharedFile {
  filepath: string
  filename: string
  url: string
  filesize: number
}

export interface SharedView {
  conversation: { conversation_id: string; title: string; shared_at: string | null }
  messages: Message[]
  files: SharedFile[]
}

const base = (cid: string): string => `/api/conversations/${encodeURIComponent(cid)}`

async function call<T>(path: string, init: RequestInit = {}): Promise<T> {
  const res = await apiFetch(path, init)
  if (!res.ok) throw await errorFromResponse(res)
  return (await res.json()) as T
}

function post<T>(path: string, body?: unknown): Promise<T> {
  return call<T>(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body ?? {}),
  })
}

export const checkpointsApi = {
  list: (cid: string) => call<Checkpoint[]>(`${base(cid)}/checkpoints`),
  diff: (cid: string, seq: number, to?: number | null) =>
    call<CheckpointDiff>(
      `${base(cid)}/checkpoints/${seq}/diff` + (to != null ? `?to=${to}` : ''),
    ),
  rewind: (cid: string, seq: number) => post<{ seq: number; files: number }>(`${base(cid)}/rewind`, { seq }),
  fork: (cid: string, seq: number) => post<{ conversation_id: string }>(`${base(cid)}/fork`, { seq }),
  share: (cid: string) => post<ShareLink>(`${base(cid)}/share`),
  revoke: (cid: string) => call<{ revoked: number }>(`${base(cid)}/share`, { method: 'DELETE' }),
}

/** The shared view's data: no login, no token (a plain fetch). */
export async function loadShared(token: string): Promise<SharedView> {
  const res = await fetch(`/api/shared/${encodeURIComponent(token)}`)
  if (!res.ok) throw await errorFromResponse(res)
  return (await res.json()) as SharedView
}

/** The share token of a `/shared/<token>` page, or null. */
export function sharedToken(pathname: string): string | null {
  const m = /^\/shared\/([A-Za-z0-9_-]{1,64})\/?$/.exec(pathname)
  return m ? m[1] : null
}

/**
 * Where the conversation stands: the checkpoints in its history (at or before the last
 * message shown) and those a rewind went back past (a rewind to one of them redoes).
 */
export function splitCheckpoints(
  checkpoints: Checkpoint[],
  lastShownSeq: number,
): { shown: Map<number, Checkpoint>; redo: Checkpoint[] } {
  const shown = new Map<number, Checkpoint>()
  const redo: Checkpoint[] = []
  for (const cp of checkpoints) {
    if (cp.seq <= lastShownSeq) shown.set(cp.seq, cp)
    else redo.push(cp)
  }
  return { shown, redo }
}

/** A diff's lines, each with its kind for the diff view. */
export function diffLines(diff: string): { text: string; kind: 'add' | 'del' | 'hunk' | 'ctx' }[] {
  return diff
    .split('\n')
    .filter((l, i, all) => !(l === '' && i === all.length - 1))
    .map((text) => {
      if (text.startsWith('+++') || text.startsWith('---')) return { text, kind: 'hunk' as const }
      if (text.startsWith('@@')) return { text, kind: 'hunk' as const }
      if (text.startsWith('+')) return { text, kind: 'add' as const }
      if (text.startsWith('-')) return { text, kind: 'del' as const }
      return { text, kind: 'ctx' as const }
    })
}
