// @vitest-environment jsdom
import { describe, expect, it } from 'vitest'
import { highlightCode, renderMarkdown, formatSize } from '../src/lib/markdown'
import { decodeText, kindByName } from '../src/lib/preview'

describe('renderMarkdown', () => {
  it('renders Markdown', () => {
    const html = renderMarkdown('# Title\n\n**bold** and `code`\n\n```python\nprint(1)\n```')
    expect(html).toContain('<h1>Title</h1>')
    expect(html).toContain('<strong>bold</strong>')
    expect(html).toContain('hljs-built_in')
  })

  it('never lets scripts or event handlers through', () => {
    const evil = [
      '<script>window.pwned = 1</script>',
      '<img src=x onerror="window.pwned=1">',
      '[click](javascript:alert(1))',
      '<a href="javascript:alert(1)">x</a>',
      '<iframe src="https://example.com"></iframe>',
      '<svg onload="alert(1)"></svg>',
    ].join('\n\n')
    const html = renderMarkdown(evil)
    const doc = new DOMParser().parseFromString(`<div>${html}</div>`, 'text/html')
    expect(doc.querySelectorAll('script, iframe, img[onerror], svg').length).toBe(0)
    for (const el of Array.from(doc.querySelectorAll('*'))) {
      for (const a of Array.from(el.attributes)) {
        expect(a.name.startsWith('on')).toBe(false)
        expect(a.value.toLowerCase()).not.toContain('javascript:')
      }
    }
    // shown as text, not dropped
    expect(doc.body.textContent).toContain('<script>window.pwned = 1</script>')
  })

  it('opens links in a new tab without opener', () => {
    const html = renderMarkdown('see https://example.com')
    expect(html).toContain('target="_blank"')
    expect(html).toContain('rel="noopener noreferrer nofollow"')
  })

  it('escapes code it cannot highlight', () => {
    expect(highlightCode('<b>&</b>', null)).toBe('&lt;b&gt;&amp;&lt;/b&gt;')
    expect(highlightCode('x = "<b>"', 'python')).not.toContain('<b>')
  })
})

describe('preview helpers', () => {
  it('picks a preview kind by name', () => {
    expect(kindByName('a/b.png')).toBe('image')
    expect(kindByName('index.html')).toBe('html')
    expect(kindByName('README.md')).toBe('markdown')
    expect(kindByName('app.py')).toBe('code')
    expect(kindByName('notes.txt')).toBe('text')
    expect(kindByName('data.bin')).toBe(null)
  })

  it('detects text vs binary', () => {
    expect(decodeText(new TextEncoder().encode('héllo'))).toBe('héllo')
    expect(decodeText(new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0x00, 0x00]))).toBe(null)
    expect(decodeText(new Uint8Array([0xff, 0xfe, 0xfd]))).toBe(null)
  })

  it('formats sizes', () => {
    expect(formatSize(12)).toBe('12 B')
    expect(formatSize(2048)).toBe('2.0 KB')
    expect(formatSize(3 * 1024 * 1024)).toBe('3.0 MB')
  })
})
