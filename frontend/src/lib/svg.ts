// An SVG file of the workspace, made safe to preview. An SVG is a document that can hold
// scripts: shown from a blob: URL of this origin, "open image in new tab" would run them as
// planact. So the preview shows DOMPurify's SVG profile of it (no script, no event handler,
// no foreignObject), without references to other hosts, as a data: URL: an <img> runs no
// script, and a data: document opened in a tab has an opaque origin besides.

import DOMPurify, { type DOMPurify as Purifier } from 'dompurify'

const SVG_NS = 'http://www.w3.org/2000/svg'
// a url(...) or @import in CSS that leaves the document (only #fragment and data: stay)
const OUTSIDE_CSS = /@import|url\s*\(\s*['"]?\s*(?!#|data:)/i
const LINK_ATTRS = ['href', 'xlink:href', 'src']

let purifier: Purifier | null = null

function svgPurifier(): Purifier {
  if (purifier) return purifier
  const p = DOMPurify(window) // an instance of its own: the Markdown hooks stay out of it
  p.addHook('afterSanitizeAttributes', (node) => {
    for (const name of LINK_ATTRS) {
      const value = (node.getAttribute(name) ?? '').trim()
      if (value && !value.startsWith('#') && !/^data:image\//i.test(value)) {
        node.removeAttribute(name)
      }
    }
    if (OUTSIDE_CSS.test(node.getAttribute('style') ?? '')) node.removeAttribute('style')
    if (node.nodeName.toLowerCase() === 'style' && OUTSIDE_CSS.test(node.textContent ?? '')) {
      node.textContent = ''
    }
  })
  purifier = p
  return p
}

/** The SVG markup of `text` with nothing in it that runs or loads, or null when it holds no
 * <svg> element. */
export function sanitizeSvg(text: string): string | null {
  const fragment = svgPurifier().sanitize(text, {
    USE_PROFILES: { svg: true, svgFilters: true },
    FORBID_TAGS: ['foreignObject'],
    RETURN_DOM_FRAGMENT: true,
  })
  const svg = Array.from(fragment.childNodes).find(
    (n): n is Element => n instanceof Element && n.namespaceURI === SVG_NS && n.localName === 'svg',
  )
  return svg ? new XMLSerializer().serializeToString(svg) : null
}

/** A data: URL of the sanitised SVG, for an <img>; null when `text` is no SVG. */
export function svgDataUrl(text: string): string | null {
  const clean = sanitizeSvg(text)
  if (clean === null) return null
  const bytes = new TextEncoder().encode(clean)
  let binary = ''
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  }
  return `data:image/svg+xml;base64,${btoa(binary)}`
}
