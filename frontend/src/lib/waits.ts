// Runs that wait for a person (docs/api.md "Runs that wait for a person"): what an approval or a question asks,
// how it was answered, whether a turn is waiting, the approval modes and the page title.
// Pure, so it is unit-tested; the store (stores/waits.ts) does the talking to the server.

import { MessageKind } from './types'
import type { Message } from './types'
import { firstOf, type ItemOf } from './metajson'

/** Message kinds that park the run until a person answers. */
export const WAIT_KINDS = new Set<string>([MessageKind.APPROVAL, MessageKind.ASK_USER])

export function isWaitMessage(msg: Message): boolean {
  return WAIT_KINDS.has(msg.meta?.action_type || '')
}

/** A request not answered yet: a stored `running` approval or question. */
export function isPendingWait(msg: Message): boolean {
  return isWaitMessage(msg) && msg.status === 'running' && !!msg.seq
}

export type ApprovalView = 'command' | 'diff' | 'text'

/** What an approval message asks to do. */
export interface ApprovalRequest {
  /** the action waiting for approval: terminal_run, write_code, … */
  actionType: string
  /** its action class: edits, terminal, web, mcp, … */
  cls: string
  params: Record<string, unknown>
  filepath: string
  /** the command, the diff, or what will happen, as the server wrote it for a person */
  text: string
  view: ApprovalView
  /** the digest of the action (the answer names it: what is approved is what runs) */
  digest: string
  /** what the server's text shows of the action: whole, or a note of what it left out */
  shown: ShownInfo | null
  /** the action's whole text, one click away when ``shown`` is not whole */
  full: string
}

/** meta.json[0].shown of an approval (docs/api.md, "Approvals"; ApprovalShown, generated) */
export type ShownInfo = ItemOf<typeof MessageKind.APPROVAL>['shown']

const EDIT_ACTIONS = new Set(['write_code', 'edit_file'])

/** The request of an approval message (its `running` version: the partner's content is the
 *  outcome, not the request). */
export function approvalRequest(msg: Message): ApprovalRequest {
  // what the server sends (ApprovalRequest); a partner carries the same item
  const first = firstOf(msg, MessageKind.APPROVAL)
  const params = first?.params ?? {}
  const actionType = first?.action_type ?? ''
  const cls = first?.class ?? ''
  const filepath = msg.meta?.filepath || params.path || ''
  let text = msg.content || ''
  let view: ApprovalView = 'text'
  let full = typeof params.content === 'string' ? params.content : JSON.stringify(params, null, 2)
  if (actionType === 'terminal_run' || cls === 'terminal') {
    view = 'command'
    // the command exactly as it will run (the content adds "(in cwd)")
    if (typeof params.command === 'string') text = params.command
    full = text
  } else if (EDIT_ACTIONS.has(actionType) || cls === 'edits') {
    view = 'diff'
  } else if (!text.trim() && Object.keys(params).length) {
    text = JSON.stringify(params, null, 2)
  }
  const digest = first?.digest ?? ''
  return { actionType, cls, params, filepath, text, view, digest, shown: first?.shown ?? null, full }
}

/** One row of a command shown with its whitespace made visible. */
export interface VisibleRow {
  /** the line's number (1-based); for a run of empty lines, the first */
  n: number
  /** a run of empty lines folded into one row: how many (0: an ordinary line) */
  blank: number
  parts: VisiblePart[]
}

export interface VisiblePart {
  /** text: as written; mark: whitespace or an invisible character, named */
  kind: 'text' | 'mark'
  text: string
  /** the characters the mark stands for (copying gives them back) */
  raw?: string
}

// characters that show as nothing (or as another) in a terminal font: named, never hidden
const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00a0\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb]/
const SPACE_RUN = 3 // this many spaces in a row (or any at a line's end) are counted aloud
export const BLANK_RUN = 3 // this many empty lines in a row are folded into one row

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`
}

function markOf(ch: string, count: number): string {
  if (ch === ' ') return plural(count, 'space')
  if (ch === '\t') return plural(count, 'tab')
  if (ch === '\r') return count === 1 ? 'CR' : `${count}× CR`
  const code = `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`
  return count === 1 ? code : `${count}× ${code}`
}

function visibleParts(line: string): VisiblePart[] {
  const parts: VisiblePart[] = []
  let text = ''
  let i = 0
  while (i < line.length) {
    const ch = line[i]
    const odd = ch === '\t' || ch === '\r' || INVISIBLE.test(ch)
    if (ch !== ' ' && !odd) {
      text += ch
      i++
      continue
    }
    let j = i
    while (j < line.length && line[j] === ch) j++
    const count = j - i
    const atEnd = /^\s*$/.test(line.slice(j)) // trailing: only whitespace after it
    if (ch === ' ' && count < SPACE_RUN && !atEnd) {
      text += line.slice(i, j)
    } else {
      if (text) parts.push({ kind: 'text', text })
      text = ''
      parts.push({ kind: 'mark', text: markOf(ch, count), raw: line.slice(i, j) })
    }
    i = j
  }
  if (text) parts.push({ kind: 'text', text })
  return parts
}

/** A command as rows a person can read whole: every line numbered, runs of spaces, tabs,
 *  trailing whitespace and invisible characters named ("400 spaces", "U+200B"), runs of
 *  empty lines folded into one row that says how many. Nothing is left out. */
export function visibleRows(text: string): VisibleRow[] {
  const lines = text.split('\n')
  const finalNewline = lines.length > 1 && lines[lines.length - 1] === ''
  if (finalNewline) lines.pop() // said aloud on the last line instead
  const rows: VisibleRow[] = []
  for (let i = 0; i < lines.length; ) {
    if (lines[i] === '') {
      let j = i
      while (j < lines.length && lines[j] === '') j++
      if (j - i >= BLANK_RUN) {
        rows.push({ n: i + 1, blank: j - i, parts: [] })
        i = j
        continue
      }
    }
    rows.push({ n: i + 1, blank: 0, parts: visibleParts(lines[i]) })
    i++
  }
  const last = rows[rows.length - 1]
  if (finalNewline && last) last.parts.push({ kind: 'mark', text: 'newline at end', raw: '\n' })
  return rows
}

/** "81 lines · 517 characters" */
export function sizeLabel(text: string): string {
  // counted as the server counts them (meta.json shown.lines): a final newline ends a line
  const lines = (text.match(/\n/g)?.length ?? 0) + (text && !text.endsWith('\n') ? 1 : 0)
  return `${plural(lines, 'line')} · ${plural(text.length, 'character')}`
}

const CLASS_LABELS: Record<string, [string, string]> = {
  edits: ['file edit', 'file edits'],
  terminal: ['command', 'commands'],
  web: ['web action', 'web actions'],
  mcp: ['MCP tool call', 'MCP tool calls'],
}

/** The class in words: "Approve all commands", "every later command". */
export function classLabel(cls: string, plural = true): string {
  const known = CLASS_LABELS[cls]
  if (known) return known[plural ? 1 : 0]
  const name = cls ? `${cls} action` : 'action of this kind'
  return plural ? name.replace(/^(\w+ )?action/, '$1actions') : name
}

const ACTION_LABELS: Record<string, string> = {
  terminal_run: 'Run a command',
  write_code: 'Write a file',
  edit_file: 'Edit a file',
  web_search: 'Search the web',
  web_fetch: 'Fetch a web page',
  mcp_tool: 'Call an MCP tool',
}

export function actionLabel(actionType: string): string {
  return ACTION_LABELS[actionType] ?? (actionType ? actionType.replace(/_/g, ' ') : 'An action')
}

export { diffLines, type DiffLine } from './diff'

export type WaitState =
  | 'pending'
  | 'approved'
  | 'rejected'
  | 'timed_out'
  | 'stopped'
  | 'answered'
  | 'interrupted'

export interface WaitOutcome {
  state: WaitState
  /** approve_all: every later action of the class is approved too */
  all: boolean
  /** the rejection reason, the answer, or what the server said */
  text: string
}

// the server's own words (backend/waits/answers.py, backend/agent/ending.py); a person's
// reason is matched only when it starts like them
const TIMED_OUT = /^(nobody (approved|answered) it within|timed out|no answer within)|\(APPROVAL_TIMEOUT\)/i
const STOPPED = /^(stopped before it finished|the run was stopped)/i
const INTERRUPTED = /^interrupted\b/i

/** A failure partner's cause: a timeout, a stop, or the person's rejection, as its words say
 *  (its meta.json is the request it answers: MetaPayloads). */
function failureState(msg: Message): WaitState {
  const text = msg.content || ''
  if (TIMED_OUT.test(text)) return 'timed_out'
  if (STOPPED.test(text)) return 'stopped'
  if (INTERRUPTED.test(text)) return 'interrupted'
  return 'rejected'
}

/** How an approval or a question ended (or that it still waits). `finished`: the run is over,
 *  so a request still `running` will get no answer. */
export function waitOutcome(msg: Message, finished: boolean): WaitOutcome {
  const text = msg.content || ''
  if (msg.status === 'running') {
    return { state: finished ? 'interrupted' : 'pending', all: false, text: '' }
  }
  const question = msg.meta?.action_type === MessageKind.ASK_USER
  if (msg.status === 'success') {
    if (question) return { state: 'answered', all: false, text }
    const all = /\bevery later\b|\ball later\b/i.test(text)
    return { state: 'approved', all, text }
  }
  const state = failureState(msg)
  return { state: question && state === 'rejected' ? 'stopped' : state, all: false, text }
}

export const APPROVAL_MODES = ['never', 'risky', 'always'] as const
export type ApprovalMode = (typeof APPROVAL_MODES)[number]

/** One line each, for the picker. */
export const APPROVAL_HELP: Record<string, string> = {
  never: 'Never ask: actions run at once',
  risky: 'Ask before commands, web and MCP tools',
  always: 'Ask before every action, file edits too',
}

export function isApprovalMode(v: unknown): v is ApprovalMode {
  return typeof v === 'string' && (APPROVAL_MODES as readonly string[]).includes(v)
}

/** The document title: a waiting run asks for the person first. */
export function pageTitle(title: string, running: boolean, waiting: boolean): string {
  const base = `${title ? `${title} — ` : ''}planact`
  if (waiting) return `⏸ Waiting for you · ${base}`
  return `${running ? '● ' : ''}${base}`
}
