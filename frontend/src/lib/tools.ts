// How a tool action's result shows (web_search, web_fetch, mcp_tool: docs/tools.md). Pure, so
// it is unit-tested; ToolResult.vue draws it. The data comes from the message's meta.json.

import { MessageKind } from './types'
import type { Message } from './types'
import { firstOf, itemsOf, type ItemOf } from './metajson'

/** A part of an MCP result as the server sends it (backend/tools/mcp/parts.py). */
type SentPart = ItemOf<typeof MessageKind.MCP_TOOL>['parts'][number]

export interface SearchHit {
  title: string
  url: string // http(s) only; anything else is dropped
  snippet: string
}

export interface McpPart {
  type: string
  text: string // the text, or a note naming the file / resource
  /** the file it was saved as, relative to the workspace (images, binary resources) */
  filepath: string
  /** what to draw as an image: the saved file's URL path is made by the component; inline
   *  base64 data becomes a data: URL (raster types only, never SVG) */
  image: 'file' | 'inline' | null
  dataUrl: string
}

export type ToolView =
  | { type: 'search'; hits: SearchHit[] }
  | { type: 'page'; title: string; url: string; extract: string; links: number; screenshot: string }
  | { type: 'mcp'; name: string; args: string; parts: McpPart[] }

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

/** Image types drawn inline from data (SVG is left out: it can carry scripts). */
const RASTER = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp'])

/** What a part names: its saved file, else its resource's uri, else a link's name. */
function partName(part: SentPart): string {
  if (part.type === 'text') return ''
  if (part.type === 'resource_link') return part.uri || part.name
  if ('filepath' in part && part.filepath) return part.filepath
  return part.uri ?? ''
}

function partText(part: SentPart): string {
  if (part.type === 'text') return part.text
  const named = partName(part)
  const error = 'error' in part ? str(part.error) : ''
  const text = 'text' in part ? part.text : ''
  return `[${part.type}${named ? `: ${named}` : ''}]${text ? ` ${text}` : ''}${error ? ` (${error})` : ''}`
}

/** A workspace-relative path a part may name (never absolute, never leaving it). */
function workspacePath(value: unknown): string {
  const path = str(value)
  if (!path || path.startsWith('/') || path.split('/').includes('..')) return ''
  return path
}

function mcpPart(part: SentPart): McpPart {
  const type = part.type
  const mime = 'mime_type' in part ? str(part.mime_type).toLowerCase() : ''
  const filepath = 'filepath' in part ? workspacePath(part.filepath) : ''
  const data = 'data' in part ? str(part.data) : ''
  const isImage = type === 'image' || mime.startsWith('image/')
  let image: McpPart['image'] = null
  let dataUrl = ''
  if (isImage && filepath) image = 'file'
  else if (isImage && RASTER.has(mime) && /^[A-Za-z0-9+/=\s]+$/.test(data)) {
    image = 'inline'
    dataUrl = `data:${mime};base64,${data.replace(/\s/g, '')}`
  }
  return { type, text: partText(part), filepath, image, dataUrl }
}

/** The structured view of a finished tool action, or null (running, or no data). */
export function toolView(msg: Message): ToolView | null {
  if (msg.status === 'running') return null
  const kind = msg.meta?.action_type
  if (kind === MessageKind.SEARCH) {
    const hits = itemsOf(msg, MessageKind.SEARCH) // SearchHit
      .map((r) => ({ title: r.title, url: safeUrl(r.url), snippet: r.snippet }))
      .filter((r) => r.url)
    return hits.length ? { type: 'search', hits } : null
  }
  const page = firstOf(msg, MessageKind.BROWSER) // PageRead: a failure has no title
  if (page) {
    if (page.markdown === undefined && page.title === undefined) return null
    return {
      type: 'page',
      title: page.title || page.url || 'Web page',
      url: safeUrl(page.url || msg.meta?.url),
      extract: page.markdown ?? '',
      links: page.links?.length ?? 0,
      screenshot: page.screenshot ?? '',
    }
  }
  const call = firstOf(msg, MessageKind.MCP_TOOL) // McpCall
  if (call?.name) {
    const args: unknown = call.arguments
    return {
      type: 'mcp',
      name: call.name,
      args: typeof args === 'string' ? args : JSON.stringify(args ?? {}, null, 2),
      parts: call.parts.map(mcpPart),
    }
  }
  return null
}
