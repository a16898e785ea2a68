// @vitest-environment jsdom
// An action with no card of its own is drawn from its declared shape: its payload models as
// the wire's schema (made from the action registry) has them. A new action needs no code here.
import { afterEach, describe, expect, it } from 'vitest'
import { createApp, h } from 'vue'
import { createPinia } from 'pinia'
import { genericView, modelsOf, type WireSchema } from '../src/lib/generic'
import type { Message } from '../src/lib/types'
import EntryView from '../src/components/EntryView.vue'

function msg(action: string, json: unknown[], status: Message['status'] = 'success'): Message {
  return {
    role: 'assistant',
    uuid: `u-${action}`,
    status,
    content: 'notes.txt: 2 lines, 3 words, 14 characters',
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

// what `make frontend-types` writes for docs/tools.md's word_count (its WordCount model)
const SCHEMA: WireSchema = {
  $defs: {
    MetaPayloads: { properties: { word_count: { items: { $ref: '#/$defs/WordCount' } } } },
    WordCount: {
      title: 'WordCount',
      properties: {
        path: { type: 'string' },
        lines: { type: 'integer' },
        words: { type: 'integer', description: 'Separated by whitespace.' },
        chars: { type: 'integer' },
      },
      required: ['path', 'lines', 'words', 'chars'],
    },
  },
}

describe('genericView', () => {
  it('draws each item as its model fields, in the model order, with their hints', () => {
    const item = { chars: 14, path: 'notes.txt', lines: 2, words: 3 }
    expect(genericView(msg('word_count', [item]), SCHEMA)).toEqual([
      {
        model: 'WordCount',
        fields: [
          { name: 'path', hint: '', value: 'notes.txt' },
          { name: 'lines', hint: '', value: '2' },
          { name: 'words', hint: 'Separated by whitespace.', value: '3' },
          { name: 'chars', hint: '', value: '14' },
        ],
      },
    ])
  })

  it('draws nothing while running, for a kind without a payload, or for no items', () => {
    const item = { path: 'a', lines: 1, words: 1, chars: 1 }
    expect(genericView(msg('word_count', [item], 'running'), SCHEMA)).toBeNull()
    expect(genericView(msg('read_file', [item]), SCHEMA)).toBeNull()
    expect(genericView(msg('word_count', []), SCHEMA)).toBeNull()
  })

  it('passes over what a newer writer adds and caps long values', () => {
    const long = { path: 'x'.repeat(5000), lines: 1, words: 1, chars: 5000, extra: true }
    const view = genericView(msg('word_count', ['a string', 7, null, long]), SCHEMA)
    expect(view).toHaveLength(1)
    expect(view![0].fields.map((f) => f.name)).toEqual(['path', 'lines', 'words', 'chars'])
    expect(view![0].fields[0].value).toHaveLength(2000 + ' […]'.length)
  })

  it('reads the committed schema: every action kind with a payload has its models', () => {
    expect(modelsOf('preview')).toEqual(['PreviewEntry'])
    expect(modelsOf('terminal_run')).toEqual(['CommandRun'])
    expect(modelsOf('read_file')).toEqual([])
  })
})

describe('EntryView', () => {
  const unmount: Array<() => void> = []
  afterEach(() => unmount.splice(0).forEach((f) => f()))

  it('draws an action with no card of its own from its declared payload', () => {
    const el = document.createElement('div')
    document.body.appendChild(el)
    const entry = { name: 'app', port: 8080, path: '/', url: 'http://p.example/t/' }
    const app = createApp({
      render: () => h(EntryView, { message: msg('preview', [entry]), conversationId: 'c1', finished: true }),
    })
    app.use(createPinia())
    app.mount(el)
    unmount.push(() => {
      app.unmount()
      el.remove()
    })
    const card = el.querySelector('[data-testid="generic-result"]')
    expect(card).not.toBeNull()
    const values = [...el.querySelectorAll('[data-testid="generic-value"]')].map((v) => v.textContent)
    expect(values).toEqual(['app', '8080', '/', 'http://p.example/t/'])
  })
})
