import { describe, expect, it } from 'vitest'
import {
  serversSummary,
  stateClass,
  stderrView,
  STDERR_OPEN_LINES,
  type McpServerInfo,
} from '../src/lib/mcpservers'

function server(name: string, state: string): McpServerInfo {
  return { name, state, tools: [] }
}

describe('MCP servers panel', () => {
  it('colours each state like the run badges', () => {
    expect(stateClass('ready')).toBe('ok')
    expect(stateClass('failed')).toBe('bad')
    expect(stateClass('starting')).toBe('live')
    expect(stateClass('something new')).toBe('idle')
  })

  it('summarises the servers by state, ready first', () => {
    expect(serversSummary([])).toBe('No MCP servers configured.')
    expect(serversSummary([server('a', 'ready')])).toBe('1 MCP server: 1 ready')
    expect(
      serversSummary([server('b', 'failed'), server('a', 'ready'), server('c', 'ready')]),
    ).toBe('3 MCP servers: 2 ready, 1 failed')
    expect(serversSummary([server('x', 'odd'), server('y', 'starting')])).toBe(
      '2 MCP servers: 1 starting, 1 odd',
    )
  })

  it('shows stderr as one block, open when short and collapsed when long', () => {
    expect(stderrView(undefined)).toBeNull()
    expect(stderrView(['', '  '])).toBeNull()
    const short = stderrView(['starting', 'fatal: TOKEN is not set'])
    expect(short).toEqual({
      text: 'starting\nfatal: TOKEN is not set',
      lines: 2,
      collapsed: false,
      label: 'stderr (last 2 lines)',
    })
    expect(stderrView(['only'])?.label).toBe('stderr (last line)')
    const long = stderrView(Array.from({ length: STDERR_OPEN_LINES + 1 }, (_, i) => `l${i}`))
    expect(long?.collapsed).toBe(true)
    expect(long?.text.split('\n')).toHaveLength(STDERR_OPEN_LINES + 1)
  })
})
