// How a tool action's result shows (web_search, web_fetch, mcp_tool: CONTRACT 11). Pure, so
// it is unit-tested; ToolResult.vue draws it. The data comes from the message's meta.json.

import { MessageKind } from './types'
import type { Message } from './types'

export interface SearchHit {
  title: string
  url: string // http(s) only; anything else is dropped
  snippet: string
}

export interface McpPart {
  type: string
  text: string // the text, or a note naming the file / resource
}

export type ToolView =
  | { type: 'search'; hits: SearchHit[] }
  | { type: 'page'; title: string; url: string; extract: string; links: number; screenshot: string }
  | { type: 'mcp'; name: string; args: string; parts: McpPart[] }

type Data = Record<string, unknown>

function str(value: unknown): string {
  return typeof value === 'string' ? value : ''
}

/** A link a person may open: http(s) only (never javascript:, data:, file:). */
export function safeUrl(value: unknown): string {
  const url = str(value).trim()
  try {
    const parsed = new URL(url)
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : ''
  } catch {
    return ''
  }
}

function partText(part: Data): string {
  const type = str(part.type)
  if (type === 'text') return str(part.text)
  const named = str(part.file) || str(part.uri) || str(part.name)
  return `[${type}${named ? `: ${named}` : ''}]${part.text ? ` ${str(part.text)}` : ''}`
}

/** The structured view of a finished tool action, or null (running, or no data). */
export function toolView(msg: Message): ToolView | null {
  if (msg.status === 'running') return null
  const data = (msg.meta?.json ?? []) as Data[]
  const kind = msg.meta?.action_type
  if (kind === MessageKind.SEARCH) {
    const hits = data
      .map((r) => ({ title: str(r.title), url: safeUrl(r.url), snippet: str(r.snippet) }))
      .filter((r) => r.url)
    return hits.length ? { type: 'search', hits } : null
  }
  const first = data[0]
  if (!first || typeof first !== 'object') return null
  if (kind === MessageKind.BROWSER) {
    if (!('markdown' in first) && !('title' in first)) return null
    return {
      type: 'page',
      title: str(first.title) || str(first.url) || 'Web page',
      url: safeUrl(first.url || msg.meta?.url),
      extract: str(first.markdown),
      links: Array.isArray(first.links) ? first.links.length : 0,
      screenshot: str(first.screenshot),
    }
  }
  if (kind === MessageKind.MCP_TOOL) {
    if (!str(first.name)) return null
    const args = first.arguments
    const parts = Array.isArray(first.parts) ? (first.parts as Data[]) : []
    return {
      type: 'mcp',
      name: str(first.name),
      args: typeof args === 'string' ? args : JSON.stringify(args ?? {}, null, 2),
      parts: parts.map((p) => ({ type: str(p.type) || 'text', text: partText(p) })),
    }
  }
  return null
}
