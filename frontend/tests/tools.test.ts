import { describe, expect, it } from 'vitest'
import { safeUrl, toolView } from '../src/lib/tools'
import { describeEntry } from '../src/lib/entries'
import type { Message } from '../src/lib/types'

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
          parts: [{ type: 'text', text: '42.0' }, { type: 'image', file: 'mcp_files/a.png' }],
        },
      ]),
    )
    expect(view).toEqual({
      type: 'mcp',
      name: 'calc__add',
      args: '{\n  "a": 2,\n  "b": 40\n}',
      parts: [
        { type: 'text', text: '42.0' },
        { type: 'image', text: '[image: mcp_files/a.png]' },
      ],
    })
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

  it('accepts only http and https addresses', () => {
    expect(safeUrl('https://example.org/a?b=1')).toBe('https://example.org/a?b=1')
    expect(safeUrl('  http://x.test/ ')).toBe('http://x.test/')
    expect(safeUrl('file:///etc/passwd')).toBe('')
    expect(safeUrl('not a url')).toBe('')
    expect(safeUrl(42)).toBe('')
  })
})
