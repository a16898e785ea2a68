// The Tools panel's view of GET /api/mcp/servers: badge colour, a one-line summary and
// how a failed server's stderr is shown (its last lines, collapsed when long).

export type McpState = 'ready' | 'starting' | 'failed'

export interface McpToolInfo {
  name: string
  description: string
}

export interface McpServerInfo {
  name: string
  state: McpState | string
  tools: McpToolInfo[]
  error?: string
  stderr?: string[]
}

/** Lines of stderr shown open; more are collapsed behind a summary. */
export const STDERR_OPEN_LINES = 6

/** The StatusBadge-style class for a server state. */
export function stateClass(state: string): 'ok' | 'bad' | 'live' | 'idle' {
  if (state === 'ready') return 'ok'
  if (state === 'failed') return 'bad'
  if (state === 'starting') return 'live'
  return 'idle'
}

/** "2 MCP servers: 1 ready, 1 failed" (states in a fixed order, only those present). */
export function serversSummary(servers: McpServerInfo[]): string {
  if (servers.length === 0) return 'No MCP servers configured.'
  const counts = new Map<string, number>()
  for (const s of servers) counts.set(s.state, (counts.get(s.state) ?? 0) + 1)
  const order = ['ready', 'starting', 'failed', ...[...counts.keys()].sort()]
  const parts = [...new Set(order)]
    .filter((state) => counts.has(state))
    .map((state) => `${counts.get(state)} ${state}`)
  const noun = servers.length === 1 ? 'MCP server' : 'MCP servers'
  return `${servers.length} ${noun}: ${parts.join(', ')}`
}

export interface StderrView {
  text: string
  lines: number
  collapsed: boolean
  label: string
}

/** A server's stderr lines as one monospace block; null when there are none. */
export function stderrView(lines: string[] | undefined): StderrView | null {
  const kept = (lines ?? []).filter((l) => l.trim() !== '')
  if (kept.length === 0) return null
  const n = kept.length
  return {
    text: kept.join('\n'),
    lines: n,
    collapsed: n > STDERR_OPEN_LINES,
    label: n === 1 ? 'stderr (last line)' : `stderr (last ${n} lines)`,
  }
}
