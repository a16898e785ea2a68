// What an action's card shows (docs/api.md "The stream"): a command as a terminal shows it, a written
// file's content, an edit's diff, a read file's excerpt. The data comes from the message's
// meta.json (the backend puts it there); a message without it (stored before, or cut short
// by a stop) is read from its content. Pure, so it is unit-tested.

import { MessageKind } from './types'
import type { Message } from './types'
import { diffLines, type DiffLine } from './diff'
import { firstOf } from './metajson'

export interface CommandView {
  command: string
  exitCode: number | null
  stdout: string
  stderr: string
  timedOut: boolean
  /** the run was stopped or its process died while the command ran */
  interrupted: boolean
  note: string
}

export interface CodeView {
  path: string
  code: string
  lines: number
  /** the card holds only the head of the file (the backend caps what it sends) */
  truncated: boolean
}

export type { DiffLine }

/** How many lines a long file shows before "show all N lines". */
export const FOLD_LINES = 20

/** A stored result's "stdout:\n…" / "stdout: (empty)" sections (messages without meta.json). */
function sections(text: string): { head: string; stdout: string; stderr: string } | null {
  const out = /(^|\n)stdout:(?: \(empty\)|\n([\s\S]*?))\n(?=stderr:)/.exec(text)
  if (!out) return null
  const rest = text.slice(out.index + out[0].length)
  const err = /^stderr:(?: \(empty\)|\n([\s\S]*))$/.exec(rest)
  if (!err) return null
  return { head: text.slice(0, out.index).trim(), stdout: out[2] ?? '', stderr: err[1] ?? '' }
}

const STOPPED = /^(stopped before it finished|interrupted)/i

/** A finished terminal_run's command and output; null while it runs or for other kinds. */
export function commandView(msg: Message): CommandView | null {
  if (msg.meta?.action_type !== MessageKind.TERMINAL_RUN || msg.status === 'running') return null
  const metaCmd = (msg.meta?.content || '').replace(/^terminal_run:\s*/, '').trim()
  const d = firstOf(msg, MessageKind.TERMINAL_RUN) // CommandRun
  if (d) {
    return {
      command: d.command || metaCmd,
      exitCode: d.exit_code,
      stdout: d.stdout,
      stderr: d.stderr,
      timedOut: d.timed_out,
      interrupted: false,
      // a timeout's words say how long it ran and what to do instead
      note: [d.timed_out ? (msg.content || '').split('\n')[0] : '', d.note].filter(Boolean).join('\n'),
    }
  }
  const text = msg.content || ''
  const parts = sections(text)
  const head = parts ? parts.head : text.trim()
  const code = /^Exit code: (-?\d+)/.exec(head)
  const interrupted = STOPPED.test(head)
  const timedOut = /^Command timed out/.test(head)
  // what is left of the head once the parts a badge shows are taken out
  const note = head
    .replace(/^Exit code: -?\d+\n?/, '')
    .replace(/\n?Output before that:$/, '')
    .replace(/^Stopped before it finished\.\s*/i, '')
  return {
    command: metaCmd,
    exitCode: code ? Number(code[1]) : null,
    stdout: parts?.stdout ?? '',
    stderr: parts?.stderr ?? '',
    timedOut,
    interrupted,
    note: note.trim(), // e.g. "Empty command.": it never ran
  }
}

/** The badge of a finished command: its exit code, or how it was cut short. */
export function exitBadge(v: CommandView): { text: string; tone: 'ok' | 'bad' | 'stopped' } {
  if (v.interrupted) return { text: 'interrupted', tone: 'stopped' }
  if (v.timedOut) return { text: 'timed out', tone: 'bad' }
  if (v.exitCode === null) return { text: 'not run', tone: 'bad' }
  return { text: `exit ${v.exitCode}`, tone: v.exitCode === 0 ? 'ok' : 'bad' }
}

/** A successful write_code's content, or a successful read_file's excerpt. */
export function codeView(msg: Message): CodeView | null {
  if (msg.status !== 'success') return null
  const at = msg.meta?.action_type
  const path = msg.meta?.filepath || ''
  if (at === MessageKind.WRITE_CODE) {
    const d = firstOf(msg, MessageKind.WRITE_CODE) // WrittenFile
    if (!d) return null
    const code = d.content
    return { path: d.path || path, code, lines: Math.max(d.lines, lineCount(code)), truncated: d.truncated }
  }
  if (at === MessageKind.READ_FILE) {
    const code = msg.content || ''
    if (!code || /^\S+ is a binary file \(\d+ bytes\)/.test(code)) return null
    return { path, code, lines: lineCount(code), truncated: false }
  }
  return null
}

/** Lines of a text: a trailing newline ends the last line, it does not start another. */
export function lineCount(text: string): number {
  return text ? text.replace(/\n$/, '').split('\n').length : 0
}

/** The first ``n`` lines of ``text``. */
export function headLines(text: string, n: number): string {
  return text.replace(/\n$/, '').split('\n').slice(0, n).join('\n')
}

/** A successful edit_file's unified diff, line by line. */
export function diffView(msg: Message): DiffLine[] | null {
  if (msg.meta?.action_type !== MessageKind.EDIT_FILE || msg.status !== 'success') return null
  const diff = firstOf(msg, MessageKind.EDIT_FILE)?.diff ?? ''
  if (!diff) return null
  return diffLines(diff)
}
