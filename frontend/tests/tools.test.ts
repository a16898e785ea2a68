import { describe, expect, it } from 'vitest'
import { safeUrl, toolView } from '../src/lib/tools'
import { describeEntry } from '../src/lib/entries'
import type { McpCall, Message } from '../src/lib/types'

function msg(action: string, json: unknown[], status: Message['status'] = 'success'): Message {
  return {
    role: 'assistant',
    uuid: 'u',
    status,
    content: 'plain result text',
    comments: '',
    memorized: '',
    timestamp: 0,
    type: '',
    conversation_id: 'c1',
    run_id: 'r1',
    seq: 1,
    meta: {
      pid: '',
      task_id: null,
      action_type: action,
      filepath: '',
      url: '',
      json: json as Message['meta']['json'],
      content: '',
      is_active: true,
    },
  }
}

describe('tool results', () => {
  it('shows search results as http(s) links only', () => {
    const view = toolView(
      msg('search', [
        { title: 'One', url: 'https://example.org/1', snippet: 'first' },
        { title: 'Evil', url: 'javascript:alert(1)', snippet: '' },
        { title: 'Data', url: 'data:text/html,<b>x</b>', snippet: '' },
      ]),
    )
    expect(view).toEqual({
      type: 'search',
      hits: [{ title: 'One', url: 'https://example.org/1', snippet: 'first' }],
    })
  })

  it('shows a fetched page as its title, address, extract and link count', () => {
    const view = toolView(
      msg('browser', [{ url: 'http://127.0.0.1:8/', title: 'Nonce Page', markdown: '# Hi', links: [{}, {}] }]),
    )
    expect(view).toMatchObject({ type: 'page', title: 'Nonce Page', extract: '# Hi', links: 2 })
  })

  it('shows an MCP call with its arguments and result parts', () => {
    const view = toolView(
      msg('mcp_tool', [
        {
          name: 'calc__add',
          arguments: { a: 2, b: 40 },
          parts: [
            { type: 'text', text: '42.0' },
            { type: 'image', mime_type: 'image/png', filepath: 'mcp_files/a.png', size: 67 },
          ],
        },
      ]),
    )
    expect(view).toEqual({
      type: 'mcp',
      name: 'calc__add',
      args: '{\n  "a": 2,\n  "b": 40\n}',
      parts: [
        { type: 'text', text: '42.0', filepath: '', image: null, dataUrl: '' },
        {
          type: 'image',
          text: '[image: mcp_files/a.png]',
          filepath: 'mcp_files/a.png',
          image: 'file',
          dataUrl: '',
        },
      ],
    })
  })

  it('draws an image from its saved file, or inline raster data, never SVG data', () => {
    const parts = (list: Record<string, unknown>[]) => {
      const view = toolView(msg('mcp_tool', [{ name: 's__t', arguments: {}, parts: list }]))
      return view?.type === 'mcp' ? view.parts : []
    }
    const [inline, svg, blob, away, broken] = parts([
      { type: 'image', mime_type: 'image/png', data: 'iVBORw0K' },
      { type: 'image', mime_type: 'image/svg+xml', data: 'PHN2Zz4=' },
      { type: 'resource', mime_type: 'application/pdf', filepath: 'mcp_files/r.pdf', uri: 'mem://r' },
      { type: 'image', mime_type: 'image/png', filepath: '/etc/passwd' },
      { type: 'image', mime_type: 'image/png', error: 'the server sent data that is not base64' },
    ])
    expect(inline).toMatchObject({ image: 'inline', dataUrl: 'data:image/png;base64,iVBORw0K' })
    expect(svg).toMatchObject({ image: null, dataUrl: '' })
    expect(blob).toMatchObject({ image: null, filepath: 'mcp_files/r.pdf' })
    expect(blob.text).toBe('[resource: mcp_files/r.pdf]')
    expect(away).toMatchObject({ image: null, filepath: '' }) // never outside the workspace
    expect(broken.text).toBe('[image] (the server sent data that is not base64)')
  })

  it('leaves running actions, failures without data and other kinds to the plain card', () => {
    expect(toolView(msg('search', [{ title: 'x', url: 'https://a.b' }], 'running'))).toBeNull()
    expect(toolView(msg('search', []))).toBeNull()
    expect(toolView(msg('mcp_tool', [{}]))).toBeNull()
    expect(toolView(msg('write_code', [{ title: 'x' }]))).toBeNull()
    // the plain card keeps the text when there is no structured view
    expect(describeEntry(msg('search', [])).output).toBe('plain result text')
    expect(describeEntry(msg('search', [{ title: 'x', url: 'https://a.b' }])).output).toBe('')
    expect(describeEntry(msg('browser', [])).label).toBe('Web page')
  })

  it('reads an MCP call in the shape the server sends (generated McpCall): the saved file is `filepath`', () => {
    const call: McpCall = {
      name: 'shots__grab',
      arguments: {},
      parts: [
        { type: 'image', mime_type: 'image/png', size: 67, filepath: 'mcp_files/a.png' },
        { type: 'resource', uri: 'mem://n.txt', mime_type: null, text: 'a note' },
        { type: 'resource_link', uri: 'https://example.org/doc', name: 'doc', mime_type: null },
        { type: 'image', mime_type: 'image/png', error: 'the server sent data that is not base64' },
      ],
    }
    // @ts-expect-error the field is `filepath`: `file` is no field of a part
    const wrong: McpCall['parts'][number] = { type: 'image', mime_type: 'image/png', file: 'x.png' }
    expect(wrong.type).toBe('image')
    const view = toolView(msg('mcp_tool', [call]))
    expect(view?.type === 'mcp' ? view.parts.map((p) => [p.image, p.filepath, p.text]) : []).toEqual([
      ['file', 'mcp_files/a.png', '[image: mcp_files/a.png]'],
      [null, '', '[resource: mem://n.txt] a note'],
      [null, '', '[resource_link: https://example.org/doc]'],
      [null, '', '[image] (the server sent data that is not base64)'],
    ])
  })

  it('accepts only http and https addresses', () => {
    expect(safeUrl('https://example.org/a?b=1')).toBe('https://example.org/a?b=1')
    expect(safeUrl('  http://x.test/ ')).toBe('http://x.test/')
    expect(safeUrl('file:///etc/passwd')).toBe('')
    expect(safeUrl('not a url')).toBe('')
    expect(safeUrl(42)).toBe('')
  })
})
