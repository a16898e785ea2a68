// Answering a waiting run (docs/api.md "Runs that wait for a person"): an approval decision or an answer to the
// agent's question. Errors come back as HttpError (409: no longer pending).

import { apiFetch } from './api'
import type { Answered, Decision as DecisionReply, DecisionDecision } from './api.gen'
import { errorFromResponse } from './sse'

/** A person's decision on an approval (generated from backend/waits/replies.py). */
export type Decision = DecisionDecision

/** The longest rejection reason the server takes. */
export const REASON_MAX = 4000

async function post<T>(path: string, body: unknown): Promise<T> {
  const res = await apiFetch(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (!res.ok) throw await errorFromResponse(res)
  return (await res.json()) as T
}

const runPath = (runId: string) => `/api/agent/runs/${encodeURIComponent(runId)}`

export function sendDecision(
  runId: string,
  uuid: string,
  decision: Decision,
  reason = '',
  digest = '',
): Promise<DecisionReply> {
  const body: { decision: Decision; reason?: string; digest?: string } = { decision }
  if (decision === 'reject' && reason.trim()) body.reason = reason.trim()
  // the action as shown: the server refuses (409) if the waiting action is another one
  if (digest) body.digest = digest
  return post(`${runPath(runId)}/approvals/${encodeURIComponent(uuid)}`, body)
}

export function sendAnswer(runId: string, uuid: string, answer: string): Promise<Answered> {
  return post(`${runPath(runId)}/answers/${encodeURIComponent(uuid)}`, { answer })
}
