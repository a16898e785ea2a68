// Previews of what the agent built (docs/api.md "Previews"): GET …/previews, stop, restart.
import { apiFetch } from './api'
import { errorFromResponse } from './sse'
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
