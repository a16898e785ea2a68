// Relative links and images in workspace Markdown resolve inside the workspace (through the
// confined download route), never elsewhere. Pure path logic is unit-tested.

import { fileUrl, withToken } from './api'

/** The workspace path a relative reference names from the Markdown file at `from`
 * (workspace-relative), or null for absolute URLs, anchors and paths leaving the workspace. */
export function resolveWorkspacePath(from: string, ref: string): string | null {
  const raw = (ref || '').trim()
  if (!raw || raw.startsWith('#') || raw.startsWith('//')) return null
  if (/^[a-z][a-z0-9+.-]*:/i.test(raw)) return null // http:, data:, mailto:, javascript: …
  let path = raw.split('#')[0].split('?')[0]
  try {
    path = decodeURIComponent(path)
  } catch {
    /* keep it as written */
  }
  if (!path) return null
  const parts = path.startsWith('/') ? [] : from.split('/').slice(0, -1)
  for (const seg of path.replace(/^\/+/, '').split('/')) {
    if (seg === '' || seg === '.') continue
    if (seg === '..') {
      if (!parts.length) return null
      parts.pop()
    } else parts.push(seg)
  }
  return parts.length ? parts.join('/') : null
}

/** Point relative <img> at the download route and mark relative <a> with the workspace path
 * they name (the caller opens those in the preview). */
export function rewriteWorkspaceLinks(root: HTMLElement, conversationId: string, from: string): void {
  if (!conversationId) return
  for (const img of Array.from(root.querySelectorAll('img'))) {
    const target = resolveWorkspacePath(from, img.getAttribute('src') || '')
    if (target) {
      img.setAttribute('src', withToken(fileUrl(conversationId, target)))
      img.dataset.workspacePath = target
    }
  }
  for (const a of Array.from(root.querySelectorAll('a'))) {
    const target = resolveWorkspacePath(from, a.getAttribute('href') || '')
    if (target) {
      a.setAttribute('href', withToken(fileUrl(conversationId, target)))
      a.removeAttribute('target')
      a.dataset.workspacePath = target
    }
  }
}
