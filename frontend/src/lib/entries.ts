// How one action / entry message is presented. Pure, so it is unit-tested.

import { MessageKind } from './types'
import type { Message } from './types'
import { toolView } from './tools'

/** Kinds with a card of their own; any other entry is shown as 'other'. */
const CARD_KINDS = [
  MessageKind.WRITE_CODE,
  MessageKind.EDIT_FILE,
  MessageKind.READ_FILE,
  MessageKind.TERMINAL_RUN,
  MessageKind.THINKING,
  MessageKind.FINISH,
] as const

export type EntryKind = (typeof CARD_KINDS)[number] | 'other'

export interface EntryDescription {
  kind: EntryKind
  label: string
  filepath: string
  command: string
  output: string
  long: boolean
  lines: number
}

const LABELS: Record<string, string> = {
  [MessageKind.WRITE_CODE]: 'Write',
  [MessageKind.EDIT_FILE]: 'Edit',
  [MessageKind.READ_FILE]: 'Read',
  [MessageKind.TERMINAL_RUN]: 'Run',
  [MessageKind.SEARCH]: 'Web search',
  [MessageKind.BROWSER]: 'Web page',
  [MessageKind.MCP_TOOL]: 'MCP tool',
}

const LONG_LINES = 12
const LONG_CHARS = 1500

/** Split a terminal_run result that echoes its command ("$ cmd\n…" or "command: cmd\n…"). */
function splitCommand(text: string): { command: string; rest: string } | null {
  const m = /^(?:\$ |command: ?)(.*)\n?/i.exec(text)
  if (!m) return null
  return { command: m[1], rest: text.slice(m[0].length) }
}

export function describeEntry(msg: Message): EntryDescription {
  const at = msg.meta?.action_type || ''
  const kind: EntryKind = CARD_KINDS.find((k) => k === at) ?? 'other'
  const filepath = msg.meta?.filepath || ''
  let command = ''
  let output = msg.content || ''
  if (kind === MessageKind.TERMINAL_RUN) {
    // the backend labels terminal actions "terminal_run: <command>" in meta.content
    const metaCmd = (msg.meta?.content || '').replace(/^terminal_run:\s*/, '').trim()
    if (msg.status === 'running') {
      // while running, content is the (full) command itself
      command = output.trim() || metaCmd
      output = ''
    } else if (metaCmd) command = metaCmd
    const split = splitCommand(output)
    if (split && (!command || split.command.trim() === command)) {
      command = split.command.trim()
      output = split.rest
    }
  } else if (kind === 'other' && msg.meta?.content && !output) {
    output = msg.meta.content
  }
  if (kind === MessageKind.WRITE_CODE && msg.status === 'running') output = ''
  if (toolView(msg)) output = '' // ToolResult.vue shows the structured result instead
  // a trailing newline ends the last line; it does not start another one
  const lines = output ? output.replace(/\n$/, '').split('\n').length : 0
  return {
    kind,
    label: LABELS[at] ?? (at ? at.replace(/_/g, ' ') : 'message'),
    filepath,
    command,
    output,
    long: lines > LONG_LINES || output.length > LONG_CHARS,
    lines,
  }
}

/** An action the agent never ran because an earlier one in the same reply failed. */
export function isSkipped(msg: Message): boolean {
  return msg.status === 'failure' && /^skipped\b/i.test((msg.content || '').trimStart())
}

/** An action cut short because the person stopped the run (not a failure of its own). */
export function isStopped(msg: Message): boolean {
  return msg.status === 'failure' && /^stopped before it finished\b/i.test((msg.content || '').trimStart())
}
