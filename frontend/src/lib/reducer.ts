// The one reducer: a flat stream of Messages (live or replayed) -> the conversation view.
//
//   conversation -> turns (one per run, in order of arrival)
//   turn         -> blocks in arrival order: the goal, replies, the plan, loose entries,
//                   the summary, error/stop and anything unknown
//   plan         -> tasks keyed by task id -> entries (actions, thinking, finish) keyed by uuid
//
// A message whose uuid was seen before replaces the earlier one in place (running -> final).
// A message whose seq is not above the last applied seq is a duplicate (reconnect overlap)
// and is ignored, so replay + live tail gives exactly the same view as one live stream.
//
// Live deltas (applyDelta) never touch lastSeq. Model text becomes a placeholder message
// (status running, seq 0) under the delta's uuid, which the stored message replaces;
// command output collects in view.live[uuid] (capped) until the command's final message.
// A reconnect or a reload shows the stored messages exactly as before.

import type { Delta } from './sse'
import { MessageKind } from './types'
import type { EndEvent, FileInfo, Message, Meta, PlanTask, RunStatus } from './types'
import { isPendingWait, isWaitMessage } from './waits'
import { firstOf, itemsOf } from './metajson'

/** what the server sends in a plan's or task's meta.json (PlanTask, generated) */
export type TaskStatus = PlanTask['status']

export interface TaskView {
  id: string
  title: string
  description: string
  requirement: string
  status: TaskStatus
  /** actions, thinking, finish notes and unknown messages of this task, by arrival */
  entries: Message[]
}

export type Block =
  | { kind: 'message'; uuid: string; message: Message }
  | { kind: 'plan'; uuid: string; message: Message }

export interface Turn {
  runId: string
  blocks: Block[]
  /** null until a plan (or a task message) arrives */
  tasks: TaskView[] | null
  /** status from the `end` event or the conversation's runs list */
  endStatus: RunStatus | null
  hasSummary: boolean
  hasError: boolean
  hasStop: boolean
  /** the run waits for the person (its status is `waiting`) */
  waiting?: boolean
}

export interface ConversationView {
  turns: Turn[]
  lastSeq: number
  /** where each uuid lives, for upserts */
  index: Record<string, { runId: string; taskId: string | null }>
  /** live output of running commands, by the command's uuid */
  live: Record<string, LiveOutput>
  /** approvals and questions as asked (their `running` message), by uuid: the answer that
   *  replaces the message does not repeat the command, the diff or the question */
  requests: Record<string, Message>
}

export interface LiveOutput {
  parts: { stream: 'stdout' | 'stderr'; text: string }[]
  size: number
  /** characters dropped from the front to stay under LIVE_OUTPUT_CAP */
  dropped: number
  /** where each stream's output ends (code points), from the deltas' offsets */
  ends?: { stdout?: number; stderr?: number }
}

/** Live command output kept per command (the tail), in characters. */
export const LIVE_OUTPUT_CAP = 64 * 1024

/** Action types the reducer treats as structure rather than as task entries. */
export const TURN_LEVEL = new Set<string>([
  MessageKind.QUESTION,
  MessageKind.AUTO_REPLY,
  MessageKind.PLAN,
  MessageKind.TASK,
  MessageKind.FINISH_SUMMERY,
  MessageKind.ERROR,
  MessageKind.STOP,
])

export function emptyView(): ConversationView {
  return { turns: [], lastSeq: 0, index: {}, live: {}, requests: {} }
}

function newTurn(runId: string): Turn {
  return {
    runId,
    blocks: [],
    tasks: null,
    endStatus: null,
    hasSummary: false,
    hasError: false,
    hasStop: false,
  }
}

function str(v: unknown): string {
  return v === null || v === undefined ? '' : String(v)
}

const TASK_STATUSES: readonly string[] = ['pending', 'running', 'completed', 'failed'] satisfies TaskStatus[]

/** A task's status as the server sends it (PlanTask.status), else the fallback (a status a
 *  newer server sends is passed over). */
function normTaskStatus(v: unknown, fallback: TaskStatus): TaskStatus {
  return typeof v === 'string' && TASK_STATUSES.includes(v) ? (v as TaskStatus) : fallback
}

/** A task of the plan as the server sends it (PlanTask), as the view holds it. */
function taskFromPlan(t: PlanTask, i: number): TaskView {
  return {
    id: t.id || String(i + 1),
    title: t.title || `Task ${i + 1}`,
    description: t.description,
    requirement: t.requirement,
    status: normTaskStatus(t.status, 'pending'),
    entries: [],
  }
}

function turnFor(view: ConversationView, runId: string): Turn {
  let turn = view.turns.find((t) => t.runId === runId)
  if (!turn) {
    turn = newTurn(runId)
    view.turns.push(turn)
  }
  return turn
}

function ensurePlanBlock(turn: Turn, msg: Message): void {
  if (turn.tasks === null) turn.tasks = []
  if (!turn.blocks.some((b) => b.kind === 'plan')) {
    turn.blocks.push({ kind: 'plan', uuid: msg.uuid, message: msg })
  }
}

function taskFor(turn: Turn, msg: Message, taskId: string): TaskView {
  ensurePlanBlock(turn, msg)
  const tasks = turn.tasks as TaskView[]
  let task = tasks.find((t) => t.id === taskId)
  if (!task) {
    task = {
      id: taskId,
      title: `Task ${taskId}`,
      description: '',
      requirement: '',
      status: 'running',
      entries: [],
    }
    tasks.push(task)
  }
  return task
}

function applyPlan(turn: Turn, msg: Message): void {
  const incoming = itemsOf(msg, MessageKind.PLAN).map(taskFromPlan)
  const old = turn.tasks ?? []
  // keep entries (and any progress already seen) of tasks we know
  turn.tasks = incoming.map((t) => {
    const prev = old.find((o) => o.id === t.id)
    if (!prev) return t
    const status = t.status === 'pending' ? prev.status : t.status
    return { ...t, status, entries: prev.entries }
  })
  for (const prev of old) {
    if (!turn.tasks.some((t) => t.id === prev.id)) turn.tasks.push(prev)
  }
  const existing = turn.blocks.find((b) => b.kind === 'plan')
  if (existing) existing.message = msg
  else turn.blocks.push({ kind: 'plan', uuid: msg.uuid, message: msg })
}

function applyTask(turn: Turn, msg: Message): void {
  const sent = firstOf(msg, MessageKind.TASK)
  const id = str(msg.meta.task_id ?? sent?.id) || String((turn.tasks?.length ?? 0) + 1)
  const task = taskFor(turn, msg, id)
  if (sent?.title) task.title = sent.title
  if (sent?.description) task.description = sent.description
  if (sent?.requirement) task.requirement = sent.requirement
  // a task message without its item (none is sent so): its status says how it stands
  const fallback: TaskStatus =
    msg.status === 'running' ? 'running' : msg.status === 'failure' ? 'failed' : 'completed'
  task.status = normTaskStatus(sent?.status, fallback)
}

function replaceIn(list: Message[], msg: Message): boolean {
  const i = list.findIndex((m) => m.uuid === msg.uuid)
  if (i < 0) return false
  list[i] = msg
  return true
}

function upsert(view: ConversationView, msg: Message): boolean {
  const where = view.index[msg.uuid]
  if (!where) return false
  const turn = view.turns.find((t) => t.runId === where.runId)
  if (!turn) return false
  if (where.taskId !== null) {
    const task = turn.tasks?.find((t) => t.id === where.taskId)
    if (task && replaceIn(task.entries, msg)) return true
  }
  const block = turn.blocks.find((b) => b.uuid === msg.uuid)
  if (block) {
    block.message = msg
    return true
  }
  return false
}

function flags(turn: Turn, at: string): void {
  if (at === MessageKind.FINISH_SUMMERY) turn.hasSummary = true
  else if (at === MessageKind.ERROR) turn.hasError = true
  else if (at === MessageKind.STOP) turn.hasStop = true
}

/** A meta with every field the wire carries, for messages made here. */
function metaOf(fields: Partial<Meta>): Meta {
  return {
    pid: '',
    task_id: null,
    action_type: '',
    filepath: '',
    url: '',
    json: [],
    content: '',
    is_active: true,
    ...fields,
  }
}

/** Apply one message. Mutates and returns the view. */
export function reduce(view: ConversationView, msg: Message): ConversationView {
  if (!msg || typeof msg !== 'object') return view
  if (!msg.meta || typeof msg.meta !== 'object') msg = { ...msg, meta: metaOf({}) }
  const seq = Number(msg.seq) || 0
  if (seq > 0) {
    if (seq <= view.lastSeq) return view
    view.lastSeq = seq
  }
  const at = msg.meta.action_type || ''
  const runId = msg.run_id || ''
  const turn = turnFor(view, runId)
  flags(turn, at)
  if (msg.status !== 'running') delete view.live[msg.uuid]
  else if (isWaitMessage(msg)) view.requests[msg.uuid] = msg
  dropMisplacedPlaceholder(view, msg, runId)

  if (at === MessageKind.PLAN) {
    applyPlan(turn, msg)
    view.index[msg.uuid] = { runId, taskId: null }
    return view
  }
  if (at === MessageKind.TASK) {
    applyTask(turn, msg)
    return view
  }
  if (!upsert(view, msg)) place(view, turn, msg, entryTaskId(msg))
  if (isWaitMessage(msg)) markWaiting(view, runId, pendingWaits(turn).length > 0) // asked, or answered
  return view
}

/** The task a message belongs to as an entry, or null for a turn-level block. */
function entryTaskId(msg: Message): string | null {
  const t = msg.meta.task_id
  if (t === null || t === undefined || t === '') return null
  return TURN_LEVEL.has(msg.meta.action_type || '') ? null : String(t)
}

function place(view: ConversationView, turn: Turn, msg: Message, taskId: string | null): void {
  if (taskId !== null) {
    taskFor(turn, msg, taskId).entries.push(msg)
    view.index[msg.uuid] = { runId: turn.runId, taskId }
    return
  }
  turn.blocks.push({ kind: 'message', uuid: msg.uuid, message: msg })
  view.index[msg.uuid] = { runId: turn.runId, taskId: null }
}

/** A placeholder: live model text not stored yet (the stored message replaces it). */
export function isLive(msg: Message): boolean {
  return msg.status === 'running' && !msg.seq
}

function findMessage(view: ConversationView, uuid: string): Message | null {
  const where = view.index[uuid]
  if (!where) return null
  const turn = view.turns.find((t) => t.runId === where.runId)
  if (!turn) return null
  if (where.taskId !== null) {
    const task = turn.tasks?.find((t) => t.id === where.taskId)
    const m = task?.entries.find((e) => e.uuid === uuid)
    if (m) return m
  }
  return turn.blocks.find((b) => b.uuid === uuid)?.message ?? null
}

function removeMessage(view: ConversationView, uuid: string): void {
  const where = view.index[uuid]
  if (!where) return
  delete view.index[uuid]
  const turn = view.turns.find((t) => t.runId === where.runId)
  if (!turn) return
  for (const task of turn.tasks ?? []) {
    const i = task.entries.findIndex((e) => e.uuid === uuid)
    if (i >= 0) task.entries.splice(i, 1)
  }
  const b = turn.blocks.findIndex((x) => x.kind === 'message' && x.uuid === uuid)
  if (b >= 0) turn.blocks.splice(b, 1)
}

/** The stored message goes where it belongs: a placeholder put elsewhere (a guessed task)
 *  is removed first; one in the right place is replaced in place by the upsert. */
function dropMisplacedPlaceholder(view: ConversationView, msg: Message, runId: string): void {
  const where = view.index[msg.uuid]
  if (!where) return
  const prev = findMessage(view, msg.uuid)
  if (!prev || !isLive(prev)) return
  if (where.runId !== runId || where.taskId !== entryTaskId(msg)) removeMessage(view, msg.uuid)
}

/** Live model text is shown as the message it will become. */
const LIVE_TYPES: Record<string, string> = { [MessageKind.SUMMARY]: MessageKind.FINISH_SUMMERY }

/** Apply one live delta of the run ``runId``. Mutates and returns the view. */
export function applyDelta(view: ConversationView, runId: string, delta: Delta): ConversationView {
  if (!delta || typeof delta.uuid !== 'string' || !delta.uuid || !delta.text) return view
  const existing = findMessage(view, delta.uuid)
  if (delta.stream || delta.action_type === MessageKind.TERMINAL_RUN) {
    if (existing && existing.status !== 'running') return view // the final message is in
    const stream = delta.stream === 'stderr' ? 'stderr' : 'stdout'
    const text = newOutput(view, delta.uuid, stream, delta.text, delta.offset ?? undefined)
    if (text) appendOutput(view, delta.uuid, stream, text)
    return view
  }
  if (existing) {
    if (isLive(existing)) existing.content += delta.text
    return view // a stored message supersedes its deltas
  }
  const at = LIVE_TYPES[delta.action_type] ?? delta.action_type
  const turn = turnFor(view, runId)
  let taskId: string | null = null
  if (!TURN_LEVEL.has(at)) {
    const tasks = turn.tasks ?? []
    for (let i = tasks.length - 1; i >= 0; i--) {
      if (tasks[i].status === 'running') {
        taskId = tasks[i].id
        break
      }
    }
  }
  const msg: Message = {
    role: 'assistant',
    uuid: delta.uuid,
    status: 'running',
    content: delta.text,
    comments: '',
    memorized: '',
    timestamp: 0,
    type: at === MessageKind.THINKING ? 'narration' : '',
    conversation_id: '',
    run_id: runId,
    seq: 0,
    meta: metaOf({ action_type: at, task_id: taskId }),
  }
  place(view, turn, msg, taskId)
  return view
}

/** Code points in ``text`` (the server counts offsets in characters, not UTF-16 units). */
function cpLength(text: string): number {
  return /[\uD800-\uDFFF]/.test(text) ? Array.from(text).length : text.length
}

/** The part of a command's output delta this view does not have yet ('' when it has all of
 *  it): a catch-up after a reload or a reconnect overlaps what came live. Output that starts
 *  past the end (a cut middle) is shown after a marker. */
function newOutput(
  view: ConversationView,
  uuid: string,
  stream: 'stdout' | 'stderr',
  text: string,
  offset: number | undefined,
): string {
  if (offset === undefined) return text
  const out = view.live[uuid]
  const end = out?.ends?.[stream] ?? 0
  const size = cpLength(text)
  if (offset + size <= end) return ''
  const ends = out ? (out.ends ??= {}) : {}
  ends[stream] = offset + size
  if (!out) view.live[uuid] = { parts: [], size: 0, dropped: 0, ends }
  if (offset < end) {
    const skip = end - offset
    return size === text.length ? text.slice(skip) : Array.from(text).slice(skip).join('')
  }
  if (offset > end) return `[… ${offset - end} characters not shown …]\n${text}`
  return text
}

function appendOutput(
  view: ConversationView,
  uuid: string,
  stream: 'stdout' | 'stderr',
  text: string,
): void {
  let out = view.live[uuid]
  if (!out) {
    view.live[uuid] = { parts: [], size: 0, dropped: 0 }
    out = view.live[uuid]
  }
  const last = out.parts[out.parts.length - 1]
  if (last && last.stream === stream) last.text += text
  else out.parts.push({ stream, text })
  out.size += text.length
  let extra = out.size - LIVE_OUTPUT_CAP
  while (extra > 0 && out.parts.length) {
    const first = out.parts[0]
    if (first.text.length <= extra) {
      out.parts.shift()
      extra -= first.text.length
      out.size -= first.text.length
      out.dropped += first.text.length
    } else {
      first.text = first.text.slice(extra)
      out.size -= extra
      out.dropped += extra
      extra = 0
    }
  }
}

/** The run ended: live text never stored (an abandoned attempt) and live output go. */
function dropLive(view: ConversationView, runId: string): void {
  const turn = view.turns.find((t) => t.runId === runId)
  if (!turn) return
  const stale: string[] = []
  for (const b of turn.blocks) if (b.kind === 'message' && isLive(b.message)) stale.push(b.uuid)
  for (const t of turn.tasks ?? []) for (const e of t.entries) if (isLive(e)) stale.push(e.uuid)
  for (const uuid of stale) removeMessage(view, uuid)
  for (const uuid of Object.keys(view.live)) {
    const where = view.index[uuid]
    if (!where || where.runId === runId) delete view.live[uuid]
  }
}

export function applyEnd(view: ConversationView, end: EndEvent): ConversationView {
  const turn = turnFor(view, end.run_id)
  turn.endStatus = end.status
  dropLive(view, turn.runId)
  return view
}

/** A run's status as GET /api/conversations/{id} gives it: `running` and `waiting` are no
 * end (the run goes on, or waits for the person); the others are. */
export function applyRunStatus(view: ConversationView, runId: string, status: RunStatus): void {
  const turn = view.turns.find((t) => t.runId === runId)
  if (!turn) return
  turn.endStatus = isRunOpen(status) ? null : status
}

/** The run has not ended: it runs, or waits for the person. */
export function isRunOpen(status: RunStatus): boolean {
  return status === 'running' || status === 'waiting'
}

/** What the turn's badge says. */
export function turnStatus(turn: Turn): RunStatus {
  if (turn.endStatus) return turn.endStatus
  if (turn.hasStop) return 'stopped'
  if (turn.hasError) return 'failed'
  return turn.waiting ? 'waiting' : 'running'
}

export function isTurnFinished(turn: Turn): boolean {
  const s = turnStatus(turn)
  return s !== 'running' && s !== 'waiting'
}

/** The run ``runId`` waits for the person (``waiting``) or goes on again. */
export function markWaiting(view: ConversationView, runId: string, waiting: boolean): void {
  const turn = view.turns.find((t) => t.runId === runId)
  if (!turn) return
  if (waiting) turn.waiting = true
  else delete turn.waiting
}

/** How a task reads once its run's end is known: the task that was running when a run was
 * stopped was stopped, not failed; one still running in a finished run was interrupted. */
export type ShownTaskStatus = TaskStatus | 'stopped' | 'interrupted' | 'waiting'

export function shownTaskStatus(turn: Turn, task: TaskView, finished: boolean): ShownTaskStatus {
  if (task.status === 'running' && !finished && turnStatus(turn) === 'waiting') return 'waiting'
  if (task.status === 'running' && finished) {
    return turnStatus(turn) === 'stopped' ? 'stopped' : 'interrupted'
  }
  if (task.status === 'failed' && turnStatus(turn) === 'stopped') {
    // the stop fails the task it interrupts: the last task that is not pending
    const started = (turn.tasks ?? []).filter((t) => t.status !== 'pending')
    if (started[started.length - 1] === task) return 'stopped'
  }
  return task.status
}

export interface Progress {
  completed: number
  failed: number
  stopped: number
  /** tasks held while the run waits for the person (absent: none) */
  waiting?: number
  total: number
}

/** Tasks by how they ended; only completed tasks fill the bar. */
export function progress(turn: Turn, finished = isTurnFinished(turn)): Progress {
  const tasks = turn.tasks ?? []
  const shown = tasks.map((t) => shownTaskStatus(turn, t, finished))
  const count = (s: ShownTaskStatus) => shown.filter((x) => x === s).length
  return {
    completed: count('completed'),
    failed: count('failed'),
    stopped: count('stopped') + count('interrupted'),
    total: tasks.length,
    ...(count('waiting') ? { waiting: count('waiting') } : {}),
  }
}

/** The plan's progress in words: "2 of 3 tasks done · 1 failed"; one task: "1 task · stopped". */
export function progressText(p: Progress): string {
  const parts =
    p.total === 1
      ? [p.completed ? '1 task done' : '1 task']
      : [`${p.completed} of ${p.total} tasks done`]
  const one = p.total === 1
  if (p.failed) parts.push(one ? 'failed' : `${p.failed} failed`)
  if (p.stopped) parts.push(one ? 'stopped' : `${p.stopped} stopped`)
  if (p.waiting) parts.push('waiting for you')
  return parts.join(' · ')
}

export function summaryFiles(msg: Message): FileInfo[] {
  const out: FileInfo[] = []
  for (const item of itemsOf(msg, MessageKind.FINISH_SUMMERY)) {
    // a file (SummaryFile); a running preview ({preview}) is not one
    if (!('filepath' in item) || !item.filepath) continue
    const { filepath, filename, url, filesize } = item
    out.push({ filepath, filename, url, filesize })
  }
  return out
}

/** Build a view from a full message list (replay). */
export function buildView(messages: Message[]): ConversationView {
  const view = emptyView()
  for (const m of [...messages].sort((a, b) => (a.seq || 0) - (b.seq || 0))) reduce(view, m)
  return view
}

/** The unanswered approvals and questions of a turn, in order. */
export function pendingWaits(turn: Turn): Message[] {
  const out: Message[] = []
  for (const b of turn.blocks) if (b.kind === 'message' && isPendingWait(b.message)) out.push(b.message)
  for (const t of turn.tasks ?? []) for (const e of t.entries) if (isPendingWait(e)) out.push(e)
  return out
}
