// Untrusted model text -> safe HTML. markdown-it with raw HTML disabled, then DOMPurify.
// Every v-html in the app goes through renderMarkdown() or highlightCode().
// Images load only from this origin, data: and blob: URLs: a remote image would tell its host
// that the conversation was opened, and whatever the model put into its URL, without a click.
// It is shown as a link instead, which the person may follow deliberately.

import DOMPurify from 'dompurify'
import MarkdownIt from 'markdown-it'
import hljs from 'highlight.js/lib/core'
import bash from 'highlight.js/lib/languages/bash'
import c from 'highlight.js/lib/languages/c'
import cpp from 'highlight.js/lib/languages/cpp'
import css from 'highlight.js/lib/languages/css'
import go from 'highlight.js/lib/languages/go'
import java from 'highlight.js/lib/languages/java'
import javascript from 'highlight.js/lib/languages/javascript'
import json from 'highlight.js/lib/languages/json'
import markdown from 'highlight.js/lib/languages/markdown'
import python from 'highlight.js/lib/languages/python'
import rust from 'highlight.js/lib/languages/rust'
import sql from 'highlight.js/lib/languages/sql'
import typescript from 'highlight.js/lib/languages/typescript'
import xml from 'highlight.js/lib/languages/xml'
import yaml from 'highlight.js/lib/languages/yaml'

hljs.registerLanguage('bash', bash)
hljs.registerLanguage('c', c)
hljs.registerLanguage('cpp', cpp)
hljs.registerLanguage('css', css)
hljs.registerLanguage('go', go)
hljs.registerLanguage('java', java)
hljs.registerLanguage('javascript', javascript)
hljs.registerLanguage('json', json)
hljs.registerLanguage('markdown', markdown)
hljs.registerLanguage('python', python)
hljs.registerLanguage('rust', rust)
hljs.registerLanguage('sql', sql)
hljs.registerLanguage('typescript', typescript)
hljs.registerLanguage('xml', xml)
hljs.registerLanguage('yaml', yaml)

const EXT_LANG: Record<string, string> = {
  py: 'python',
  js: 'javascript',
  mjs: 'javascript',
  cjs: 'javascript',
  jsx: 'javascript',
  ts: 'typescript',
  tsx: 'typescript',
  json: 'json',
  sh: 'bash',
  bash: 'bash',
  zsh: 'bash',
  c: 'c',
  h: 'c',
  cc: 'cpp',
  cpp: 'cpp',
  hpp: 'cpp',
  css: 'css',
  go: 'go',
  java: 'java',
  md: 'markdown',
  rs: 'rust',
  sql: 'sql',
  html: 'xml',
  htm: 'xml',
  xml: 'xml',
  svg: 'xml',
  vue: 'xml',
  yml: 'yaml',
  yaml: 'yaml',
  toml: 'yaml',
}

export function languageFor(filename: string): string | null {
  const ext = filename.toLowerCase().split('.').pop() ?? ''
  if (filename.toLowerCase().endsWith('dockerfile') || ext === 'makefile') return 'bash'
  return EXT_LANG[ext] ?? null
}

function escapeHtml(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
}

/** Whether an <img> may load `src`: a data: URL, or a URL (relative, blob: or absolute) of
 * the page's own origin. Anything else names another host. */
export function imageAllowed(src: string, base: string = pageUrl()): boolean {
  const raw = (src || '').trim()
  if (!raw) return false
  let url: URL
  try {
    url = new URL(raw, base)
  } catch {
    return false
  }
  if (url.protocol === 'data:') return true
  if (!['http:', 'https:', 'blob:'].includes(url.protocol)) return false
  const own = new URL(base).origin
  return own !== 'null' && url.origin === own
}

function pageUrl(): string {
  return typeof location !== 'undefined' && location.href ? location.href : 'about:blank'
}

let hooked = false
function purify(html: string): string {
  if (!hooked) {
    DOMPurify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A' && node.getAttribute('href')) {
        node.setAttribute('target', '_blank')
        node.setAttribute('rel', 'noopener noreferrer nofollow')
      }
      if (node.tagName === 'IMG') {
        // the renderer never emits a remote image; whatever else made one loads nothing
        node.removeAttribute('srcset')
        if (!imageAllowed(node.getAttribute('src') ?? '')) node.removeAttribute('src')
      }
    })
    hooked = true
  }
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe'],
    FORBID_ATTR: ['style'],
  })
}

/** Highlighted, escaped HTML for code (no sanitizer needed for escaped text, but run it anyway). */
export function highlightCode(code: string, lang: string | null): string {
  if (lang && hljs.getLanguage(lang)) {
    try {
      return purify(hljs.highlight(code, { language: lang, ignoreIllegals: true }).value)
    } catch {
      /* fall through */
    }
  }
  return escapeHtml(code)
}

const md = new MarkdownIt({
  html: false,
  linkify: true,
  breaks: false,
  highlight(code, lang) {
    const l = lang && hljs.getLanguage(lang) ? lang : null
    const body = l ? highlightCode(code, l) : escapeHtml(code)
    return `<pre class="hljs"><code>${body}</code></pre>`
  },
})

const renderImage = md.renderer.rules.image!
md.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx]
  const src = String(token.attrGet('src') ?? '')
  if (imageAllowed(src)) return renderImage(tokens, idx, options, env, self)
  const alt = self.renderInlineAsText(token.children ?? [], options, env).trim()
  const label = escapeHtml(`Image: ${alt || src}`)
  // inside a link already (a linked badge): its text only, a link cannot hold a link
  let depth = 0
  for (const t of tokens.slice(0, idx)) {
    if (t.type === 'link_open') depth++
    else if (t.type === 'link_close') depth--
  }
  if (depth > 0) return `<span class="remote-image">${label}</span>`
  const title = escapeHtml(`Not loaded (another site): ${src}`)
  return `<a class="remote-image" href="${escapeHtml(src)}" title="${title}">${label}</a>`
}

export function renderMarkdown(text: string): string {
  return purify(md.render(text ?? ''))
}

export function formatSize(n: number): string {
  if (!Number.isFinite(n) || n < 0) return ''
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`
  return `${(n / 1024 / 1024).toFixed(1)} MB`
}
