// Previews of what the agent built (docs/api.md "Previews"): GET …/previews, stop, restart.
import { api, apiFetch } from './api'
import { errorFromResponse } from './sse'
import type { Turn } from './reducer'
import type { PreviewOut } from './types'

/** One preview, as GET …/previews lists it (generated from the server's model). */
export type PreviewInfo = PreviewOut
export type PreviewState = PreviewOut['state']

function base(conversationId: string): string {
  return `/api/conversations/${encodeURIComponent(conversationId)}/previews`
}

export async function listPreviews(conversationId: string): Promise<PreviewInfo[]> {
  const res = await apiFetch(base(conversationId))
  if (!res.ok) throw await errorFromResponse(res)
  return (await res.json()) as PreviewInfo[]
}

export async function previewAction(
  conversationId: string,
  name: string,
  action: 'stop' | 'restart',
): Promise<PreviewInfo> {
  const res = await apiFetch(`${base(conversationId)}/${encodeURIComponent(name)}/${action}`, {
    method: 'POST',
  })
  if (!res.ok) throw await errorFromResponse(res)
  return (await res.json()) as PreviewInfo
}

/** The preview to show: the one named, else the newest ready one, else the newest. */
export function pickPreview(list: PreviewInfo[], name: string | null): PreviewInfo | null {
  if (!list.length) return null
  const named = name ? list.find((p) => p.name === name) : undefined
  if (named) return named
  const ready = list.filter((p) => p.state === 'ready')
  return (ready.length ? ready : list)[(ready.length ? ready : list).length - 1]
}

export function stateLabel(state: PreviewState): string {
  return { starting: 'starting…', ready: 'running', stopped: 'stopped', failed: 'failed' }[state]
}

/** A key that changes whenever a preview action's message appears or changes anywhere in the
 * conversation: as a loose block, or (the usual place) among a task's entries. */
export function previewActivity(turns: Turn[]): string {
  const keys: string[] = []
  for (const turn of turns) {
    const messages = [
      ...turn.blocks.map((b) => b.message),
      ...(turn.tasks ?? []).flatMap((t) => t.entries),
    ]
    for (const m of messages) {
      if (m.meta?.action_type === 'preview') keys.push(`${m.uuid}:${m.status}`)
    }
  }
  return keys.join(',')
}

/** Whether a workspace file is an HTML page (it opens live, scripts on, on the preview origin). */
export function isPage(filepath: string): boolean {
  return /\.html?$/i.test(filepath)
}

/** The conversation's HTML pages and the address each opens live at (its `preview_url` in the
 * file listing), by path. */
export async function livePages(conversationId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const f of await api.files(conversationId)) if (f.preview_url) out[f.filepath] = f.preview_url
  return out
}
