// Which model each run used, what the model picker should show for a conversation, what the
// "Check model" result says, and which conversations the sidebar lists.

import type { ConversationDetail, ConversationSummary, ModelCheck, RunInfo } from './types'

/** The model a run ran with: its own, or the server default when it named none. */
export function runModel(run: RunInfo | undefined, fallback: string | null): string | null {
  const own = run?.model
  if (typeof own === 'string' && own) return own
  return fallback || null
}

/** run_id → model, for every run of the conversation. */
export function modelsByRun(
  detail: ConversationDetail | null,
  fallback: string | null,
): Record<string, string> {
  const out: Record<string, string> = {}
  for (const r of detail?.runs ?? []) {
    const m = runModel(r, fallback)
    if (r.run_id && m) out[r.run_id] = m
  }
  return out
}

/** The model the picker should show for a conversation: its latest run's, when still offered. */
export function latestRunModel(
  detail: ConversationDetail | null,
  fallback: string | null,
  offered: readonly string[],
): string | null {
  const runs = detail?.runs ?? []
  if (!runs.length) return null
  const m = runModel(runs[runs.length - 1], fallback)
  return m && offered.includes(m) ? m : null
}

/** The check result in words, naming the model that was checked. */
export function checkText(c: ModelCheck | null, asked: string | null): string {
  if (!c) return ''
  const name = c.model || asked
  if (c.ok) {
    const took = `The model answered in ${(c.latency_ms / 1000).toFixed(1)} s`
    return name ? `${took} (${name}).` : `${took}.`
  }
  const why = c.error || 'The model did not answer.'
  return name ? `${name}: ${why}` : why
}

/** A conversation made only to hold attachments, never sent a goal, never named. */
export function isUnusedDraft(c: ConversationSummary): boolean {
  return !c.title && (c.status === 'idle' || !c.status)
}

/** What the sidebar lists: unused drafts are left out, except the one being worked on. */
export function sidebarConversations(
  list: readonly ConversationSummary[],
  currentId: string | null,
): ConversationSummary[] {
  return list.filter((c) => c.conversation_id === currentId || !isUnusedDraft(c))
}
