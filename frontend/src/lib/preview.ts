// Decide how to preview a workspace file.

import { languageFor } from './markdown'

export type PreviewKind = 'image' | 'html' | 'markdown' | 'code' | 'text' | 'binary'

const IMAGE = new Set(['png', 'jpg', 'jpeg', 'gif', 'webp', 'bmp', 'ico', 'svg', 'avif'])
const HTML = new Set(['html', 'htm'])
const MARKDOWN = new Set(['md', 'markdown'])
const TEXT = new Set(['txt', 'log', 'csv', 'tsv', 'ini', 'cfg', 'conf', 'env', 'gitignore', ''])

export const PREVIEW_LIMIT = 2 * 1024 * 1024

export function extOf(name: string): string {
  const base = name.split('/').pop() ?? name
  const i = base.lastIndexOf('.')
  return i > 0 ? base.slice(i + 1).toLowerCase() : ''
}

export function kindByName(name: string): PreviewKind | null {
  const ext = extOf(name)
  if (IMAGE.has(ext)) return 'image'
  if (HTML.has(ext)) return 'html'
  if (MARKDOWN.has(ext)) return 'markdown'
  if (languageFor(name)) return 'code'
  if (TEXT.has(ext)) return 'text'
  return null
}

/** Decode bytes as UTF-8 text, or null when they do not look like text. */
export function decodeText(bytes: Uint8Array): string | null {
  const probe = bytes.subarray(0, 8192)
  if (probe.includes(0)) return null
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    return null
  }
}

export function imageMime(name: string): string {
  const ext = extOf(name)
  if (ext === 'svg') return 'image/svg+xml'
  if (ext === 'jpg') return 'image/jpeg'
  if (ext === 'ico') return 'image/x-icon'
  return `image/${ext || 'png'}`
}
