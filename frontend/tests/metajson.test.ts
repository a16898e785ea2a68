// meta.json read through its generated types (metajson.ts): each reader gets its kind's
// items, exactly as the server stores and sends them. The items here are the server's own:
// tests/messages/meta_json.fixture.json, what every backend writer stored in a real run
// (tests/support/meta_writers.py; the backend checks its writers still store exactly that).
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { firstOf, itemsOf } from '../src/lib/metajson'
import { codeView, commandView, diffView } from '../src/lib/cards'
import { buildView, summaryFiles } from '../src/lib/reducer'
import { toolView } from '../src/lib/tools'
import { approvalRequest, waitOutcome } from '../src/lib/waits'
import type { MetaItem } from '../src/lib/message.gen'
import { MessageKind } from '../src/lib/types'
import type { Message } from '../src/lib/types'

const FIXTURE = fileURLToPath(new URL('../../tests/messages/meta_json.fixture.json', import.meta.url))
const stored = JSON.parse(readFileSync(FIXTURE, 'utf8')) as Record<string, [string, string][]>

let n = 0
function message(kind: string, json: MetaItem[], status: Message['status'] = 'success', content = ''): Message {
  n += 1
  return {
    role: kind === 'question' ? 'user' : 'assistant',
    uuid: `u${n}`,
    status,
    content,
    comments: '',
    memorized: '',
    timestamp: 0,
    type: '',
    conversation_id: 'c1',
    run_id: 'r1',
    seq: n,
    meta: { pid: '', task_id: null, action_type: kind, filepath: '', url: '', json, content: '', is_active: true },
  }
}

/** The stored messages of ``kind`` in a scenario that carry items, as messages. */
function sent(scenario: string, kind: string): Message[] {
  return stored[scenario]
    .filter(([k, json]) => k === kind && json !== '[]')
    .map(([k, json]) => message(k, JSON.parse(json) as MetaItem[]))
}

describe('itemsOf', () => {
  it("gives a kind's items, none of another kind's, and passes over what is not an object", () => {
    const [plan] = sent('agent_run', 'plan')
    expect(itemsOf(plan, MessageKind.PLAN).map((t) => t.title)).toEqual(['Write it', 'Break it'])
    expect(itemsOf(plan, MessageKind.TASK)).toEqual([])
    expect(firstOf(plan, MessageKind.FINISH_SUMMERY)).toBeUndefined()
    const newer = message('task', [7, 'x', null, { id: 't', title: 'T' }] as unknown as MetaItem[])
    expect(itemsOf(newer, MessageKind.TASK)).toEqual([{ id: 't', title: 'T' }])
    expect(itemsOf(message('hologram', [{ beam: 1 }]), MessageKind.TASK)).toEqual([])
  })
})

describe("the readers read the server's items", () => {
  it('the plan, its tasks and the summary files', () => {
    // the fixture names every task id <task>: here each is told apart by its title
    const named = (json: string) =>
      (JSON.parse(json) as MetaItem[]).map((i) => ('title' in i && 'id' in i ? { ...i, id: i.title } : i))
    const msgs = stored.agent_run
      .filter(([k]) => ['question', 'plan', 'task', 'finish_summery'].includes(k))
      .map(([k, json]) => message(k, named(json) as MetaItem[]))
    const turn = buildView(msgs).turns[0]
    expect(turn.tasks?.map((t) => [t.title, t.description, t.status])).toEqual([
      ['Write it', 'Do: Write it', 'completed'],
      ['Break it', 'Do: Break it', 'completed'],
    ])
    const [summary] = sent('agent_run', 'finish_summery')
    expect(summaryFiles(summary)).toEqual([
      { filepath: 'app.py', filename: 'app.py', url: '/api/files/<cid>/app.py', filesize: 68 },
    ])
    const [question] = sent('agent_run', 'question')
    expect(firstOf(question, MessageKind.QUESTION)?.budget.max_tokens).toBe(2000000)
  })

  it('a command, a written file and an edit', () => {
    const [ok, failed] = sent('agent_run', 'terminal_run')
    expect(commandView(ok)).toMatchObject({ command: 'python3 app.py', exitCode: 0, stdout: 'a < b && c > d\n3\n' })
    expect(commandView(failed)).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n', timedOut: false })
    const [timedOut] = sent('tool_actions', 'terminal_run')
    expect(commandView(timedOut)).toMatchObject({ exitCode: null, timedOut: true, stdout: 'started\n' })
    const [written] = sent('agent_run', 'write_code')
    expect(codeView(written)).toMatchObject({ path: 'app.py', lines: 2, truncated: false })
    const [edit] = sent('agent_run', 'edit_file')
    const lines = diffView(edit)!.map((l) => l.text)
    expect(lines.filter((l) => l.includes('print('))).toHaveLength(3) // the context, - and +
  })

  it('a search, a page, a failed fetch and MCP calls', () => {
    const [search] = sent('tool_actions', 'search')
    expect(toolView(search)).toMatchObject({ type: 'search', hits: [{ title: 'Result 1' }, {}, {}] })
    const [page, failed] = sent('tool_actions', 'browser')
    expect(toolView(page)).toMatchObject({ type: 'page', title: 'Nonce Page', links: 2 })
    expect(toolView(failed)).toMatchObject({ type: 'page', extract: '', links: 0 })
    const [report, image, bad] = sent('tool_actions', 'mcp_tool')
    const parts = (toolView(report) as { parts: { type: string; text: string }[] }).parts
    expect(parts.map((p) => p.type)).toEqual(['text', 'resource', 'resource', 'resource_link'])
    expect(parts[1].text).toBe('[resource: mem://notes.txt] a note')
    expect(toolView(image)).toMatchObject({ type: 'mcp', parts: [{ type: 'image', image: 'file' }] })
    expect(toolView(bad)).toMatchObject({ type: 'mcp', args: '{not json' })
  })

  it('an approval, and its answered partner carrying the same request', () => {
    const [asked, partner] = sent('answered_waits', 'approval')
    const request = approvalRequest(asked)
    expect(request).toMatchObject({
      actionType: 'terminal_run',
      cls: 'terminal',
      view: 'command',
      text: 'echo approved >> log.txt',
      shown: { whole: true, note: '', lines: 1, chars: 24 },
    })
    expect(request.digest).toMatch(/^sha256:/)
    const answered = { ...partner, status: 'success' as const, content: 'Approved' }
    expect(waitOutcome(answered, false)).toMatchObject({ state: 'approved', all: false })
  })
})
