// A unified diff read line by line: one reader for every card that shows a diff (an edit's
// result, an edit waiting for approval).

export type DiffLineKind = 'file' | 'hunk' | 'add' | 'del' | 'ctx' | 'note'

export interface DiffLine {
  kind: DiffLineKind
  text: string
}

/** The lines of a unified diff, each with its kind ("--- a"/"+++ b" headers, "@@" hunks,
 *  "+" added, "-" removed, "\ No newline" and "[…]" notes, the rest context). Inside a hunk
 *  "---" is a removed line. */
export function diffLines(text: string): DiffLine[] {
  const lines = (text || '').replace(/\n$/, '').split('\n')
  const out: DiffLine[] = []
  let inHunk = false
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    const header =
      (line.startsWith('--- ') && (lines[i + 1] ?? '').startsWith('+++ ')) ||
      (!inHunk && (line.startsWith('+++ ') || line.startsWith('--- ')))
    if (line.startsWith('diff ') || header) {
      inHunk = false
      out.push({ kind: 'file', text: line })
    } else if (line.startsWith('+++ ') && out[out.length - 1]?.kind === 'file') {
      out.push({ kind: 'file', text: line })
    } else if (line.startsWith('@@')) {
      inHunk = true
      out.push({ kind: 'hunk', text: line })
    } else if (line.startsWith('+')) out.push({ kind: 'add', text: line })
    else if (line.startsWith('-')) out.push({ kind: 'del', text: line })
    else if (line.startsWith('\\') || line.startsWith('[')) out.push({ kind: 'note', text: line })
    else out.push({ kind: 'ctx', text: line })
  }
  return out
}
