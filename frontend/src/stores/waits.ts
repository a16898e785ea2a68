// Runs that wait for a person, in the app: the approval mode picked for the next run, whether
// the open run waits (title, sidebar, live view), and answering approvals and questions.

import { defineStore } from 'pinia'
import { computed, ref, watch } from 'vue'
import { api } from '../lib/api'
import { sendAnswer, sendDecision, type Decision } from '../lib/answers'
import { reduce, turnStatus } from '../lib/reducer'
import { isApprovalMode, type ApprovalMode } from '../lib/waits'
import { useApp } from './app'

export const useWaits = defineStore('waits', () => {
  const app = useApp()

  /** the modes this server offers (none: an older server, no picker, nothing sent) */
  const modes = computed((): ApprovalMode[] =>
    (app.settings?.approval_modes ?? []).filter(isApprovalMode),
  )
  const approval = ref<ApprovalMode | null>(null)

  // the server default until a mode is picked or a conversation's run says otherwise
  watch(
    () => app.settings,
    (s) => {
      if (approval.value && modes.value.includes(approval.value)) return
      const def = s?.approval
      approval.value = isApprovalMode(def) && modes.value.includes(def) ? def : (modes.value[0] ?? null)
    },
    { immediate: true },
  )

  // an opened conversation shows the mode its latest run ran with (runs[].approval), once
  let syncedFor: string | null = null
  watch(
    () => [app.currentId, app.detail] as const,
    ([id, d]) => {
      if (!id) syncedFor = null
      if (!id || !d || d.conversation_id !== id || syncedFor === id) return
      syncedFor = id
      const runs = d.runs ?? []
      const last = runs[runs.length - 1]?.approval
      if (isApprovalMode(last) && modes.value.includes(last)) approval.value = last
    },
  )

  /** "approval" for POST /api/agent/run, or null when the server offers no modes */
  function approvalForRun(): ApprovalMode | null {
    return modes.value.length && approval.value ? approval.value : null
  }

  /** the open run is parked, waiting for an answer from the person */
  const waiting = computed(() => {
    const rid = app.activeRunId
    if (!rid || rid === 'pending') return false
    const turn = app.view.turns.find((t) => t.runId === rid)
    return !!turn && turnStatus(turn) === 'waiting'
  })

  // the sidebar marks the open conversation at once, not at its next refresh (and a list
  // fetched a moment before the run parked does not undo it)
  watch([waiting, () => app.conversations], ([w]) => {
    if (!app.running) return
    const c = app.conversations.find((x) => x.conversation_id === app.currentId)
    if (c && (c.status === 'running' || c.status === 'waiting')) c.status = w ? 'waiting' : 'running'
  })

  /** Fetch the open conversation's messages again and apply what is new (an answer given
   *  elsewhere, e.g. in another tab). */
  async function refresh(conversationId: string): Promise<void> {
    if (!conversationId || conversationId !== app.currentId) return
    try {
      const msgs = await api.messages(conversationId)
      if (conversationId !== app.currentId) return
      for (const m of Array.isArray(msgs) ? msgs : []) reduce(app.view, m)
    } catch {
      /* the stream will bring it, or the next open */
    }
  }

  /** ``digest``: the digest of the action the person was shown (the approval's meta.json) */
  function decide(runId: string, uuid: string, decision: Decision, reason = '', digest = '') {
    return sendDecision(runId, uuid, decision, reason, digest)
  }

  function answer(runId: string, uuid: string, text: string) {
    return sendAnswer(runId, uuid, text)
  }

  return { modes, approval, approvalForRun, waiting, refresh, decide, answer }
})
