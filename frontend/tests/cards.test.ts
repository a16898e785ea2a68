// @vitest-environment jsdom
// The action cards: what they read from a message (meta.json, or the content of a message
// stored without it) and how the card components draw it, mounted in jsdom.
import { afterEach, describe, expect, it } from 'vitest'
import { createApp, h, type Component } from 'vue'
import { createPinia } from 'pinia'
import { codeView, commandView, diffView, exitBadge } from '../src/lib/cards'
import { buildView, progress, progressText, shownTaskStatus, turnStatus, isTurnFinished, markWaiting } from '../src/lib/reducer'
import type { Message } from '../src/lib/types'
import type { MetaItem } from '../src/lib/message.gen'
import CommandCard from '../src/components/cards/CommandCard.vue'
import CodeBlock from '../src/components/cards/CodeBlock.vue'
import DiffView from '../src/components/cards/DiffView.vue'
import EntryView from '../src/components/EntryView.vue'
import StatusBadge from '../src/components/StatusBadge.vue'
import PlanView from '../src/components/PlanView.vue'

function msg(
  action: string,
  content: string,
  json: MetaItem[] = [],
  status: Message['status'] = 'success',
  extra: Partial<Message['meta']> = {},
): Message {
  return {
    role: 'assistant',
    uuid: `u-${action}-${status}`,
    status,
    content,
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
      json,
      content: '',
      is_active: true,
      ...extra,
    },
  }
}

const mounted: Array<() => void> = []
afterEach(() => {
  while (mounted.length) mounted.pop()!()
})

function mount(component: Component, props: Record<string, unknown>): HTMLElement {
  const el = document.createElement('div')
  document.body.appendChild(el)
  const app = createApp({ render: () => h(component, props) })
  app.use(createPinia())
  app.mount(el)
  mounted.push(() => {
    app.unmount()
    el.remove()
  })
  return el
}

const by = (el: HTMLElement, id: string) => el.querySelector(`[data-testid="${id}"]`) as HTMLElement | null

const RAN = {
  command: 'make',
  exit_code: 2,
  stdout: 'cc -c a.c\n',
  stderr: 'a.c:1: error\n',
  timed_out: false,
  note: '',
}

describe('commandView', () => {
  it('reads the exit code and both streams from meta.json', () => {
    const v = commandView(msg('terminal_run', 'Exit code: 2\nstdout:\n…', [RAN], 'failure'))
    expect(v).toMatchObject({ command: 'make', exitCode: 2, stdout: 'cc -c a.c\n', stderr: 'a.c:1: error\n' })
    expect(exitBadge(v!)).toEqual({ text: 'exit 2', tone: 'bad' })
    expect(exitBadge({ ...v!, exitCode: 0 })).toEqual({ text: 'exit 0', tone: 'ok' })
    expect(exitBadge({ ...v!, timedOut: true, exitCode: null })).toEqual({ text: 'timed out', tone: 'bad' })
  })

  it('reads a message stored without meta.json from its content', () => {
    const content = 'Exit code: 0\nstdout:\nhello\nstderr: (empty)'
    const v = commandView(msg('terminal_run', content, [], 'success', { content: 'terminal_run: echo hello' }))
    expect(v).toMatchObject({ command: 'echo hello', exitCode: 0, stdout: 'hello', stderr: '', note: '' })
  })

  it('reads a command cut short by a stop as interrupted, with what it printed', () => {
    const content = 'Stopped before it finished.\nOutput before that:\nstdout:\nwaiting\n\nstderr: (empty)'
    const v = commandView(msg('terminal_run', content, [], 'failure'))!
    expect(v).toMatchObject({ interrupted: true, stdout: 'waiting\n', stderr: '', note: '' })
    expect(exitBadge(v)).toEqual({ text: 'interrupted', tone: 'stopped' })
  })

  it('says a command that never ran did not run', () => {
    const v = commandView(msg('terminal_run', 'Empty command.', [], 'failure'))!
    expect(v.note).toBe('Empty command.')
    expect(exitBadge(v).text).toBe('not run')
  })

  it('is null while the command runs and for other actions', () => {
    expect(commandView(msg('terminal_run', 'make', [], 'running'))).toBeNull()
    expect(commandView(msg('write_code', 'x'))).toBeNull()
  })
})

describe('codeView and diffView', () => {
  it('shows what a write wrote and what a read read, not a failure or a binary file', () => {
    const w = msg('write_code', 'File a.py written successfully.', [
      { path: 'a.py', content: 'x = 1\n', lines: 1, truncated: false },
    ])
    expect(codeView(w)).toEqual({ path: 'a.py', code: 'x = 1\n', lines: 1, truncated: false })
    expect(codeView(msg('write_code', 'Refused', [], 'failure'))).toBeNull()
    expect(codeView(msg('write_code', 'File a.py written successfully.'))).toBeNull()
    const r = msg('read_file', 'a\nb\n', [], 'success', { filepath: 'n.txt' })
    expect(codeView(r)).toEqual({ path: 'n.txt', code: 'a\nb\n', lines: 2, truncated: false })
    expect(codeView(msg('read_file', 'x.bin is a binary file (12 bytes); not shown as text.'))).toBeNull()
  })

  it('classifies each line of a diff', () => {
    const d = diffView(msg('edit_file', 'ok', [{ path: 'a', diff: '--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n z\n' }]))
    expect(d!.map((l) => l.kind)).toEqual(['file', 'file', 'hunk', 'del', 'add', 'ctx'])
    expect(diffView(msg('edit_file', 'old_str was not found', [], 'failure'))).toBeNull()
  })
})

describe('card components', () => {
  it('CommandCard: the command, stdout and stderr apart, the exit badge, no scaffolding', () => {
    const m = msg('terminal_run', 'Exit code: 2\nstdout:\ncc -c a.c\n\nstderr:\na.c:1: error\n', [RAN], 'failure')
    const el = mount(CommandCard, { message: m, command: '', running: false, interrupted: false })
    expect(by(el, 'command')!.textContent).toBe('$ make')
    expect(by(el, 'stdout')!.textContent).toBe('cc -c a.c\n')
    expect(by(el, 'stderr')!.textContent).toBe('a.c:1: error\n')
    expect(by(el, 'stderr')!.classList.contains('stderr')).toBe(true)
    const badge = by(el, 'exit-badge')!
    expect(badge.textContent).toBe('exit 2')
    expect(badge.classList.contains('bad')).toBe(true)
    expect(el.textContent).not.toMatch(/stdout:|stderr:|\(empty\)|Exit code/)
  })

  it('CommandCard: live output while it runs, no badge yet; interrupted once the run ended', () => {
    const running = msg('terminal_run', 'sleep 9', [], 'running')
    const live = { parts: [{ stream: 'stderr', text: 'warn\n' }], size: 5, dropped: 0 }
    let el = mount(CommandCard, { message: running, command: 'sleep 9', live, running: true, interrupted: false })
    expect(by(el, 'live-output')!.querySelector('.stderr')!.textContent).toBe('warn\n')
    expect(by(el, 'exit-badge')).toBeNull()
    el = mount(CommandCard, { message: running, command: 'sleep 9', running: false, interrupted: true })
    expect(by(el, 'exit-badge')!.textContent).toBe('interrupted')
  })

  it('CodeBlock: highlighted, folded to 20 lines, unfolds to all', async () => {
    const code = Array.from({ length: 30 }, (_, i) => `def f${i}(): return ${i}`).join('\n') + '\n'
    const el = mount(CodeBlock, { code, path: 'app.py', lines: 30 })
    const card = by(el, 'code')!
    expect(card.dataset.folded).toBe('1')
    expect(card.querySelector('.hljs-keyword')!.textContent).toBe('def')
    expect(card.textContent).toContain('def f19()')
    expect(card.textContent).not.toContain('def f20()')
    const more = by(el, 'code-unfold')!
    expect(more.textContent!.trim()).toBe('Show all 30 lines')
    more.click()
    await Promise.resolve()
    expect(card.dataset.folded).toBe('0')
    expect(card.textContent).toContain('def f29()')
    expect(by(el, 'code-unfold')).toBeNull()
  })

  it('CodeBlock: a short file is not folded; a capped one says so', () => {
    const el = mount(CodeBlock, { code: 'a\nb\n', path: 'n.txt', lines: 5000, truncated: true })
    expect(by(el, 'code')!.dataset.folded).toBe('0')
    expect(by(el, 'code-truncated')!.textContent).toContain('The first 2 of 5000 lines')
  })

  it('DiffView: removed and added lines each with their class', () => {
    const lines = diffView(msg('edit_file', 'ok', [{ path: 'a', diff: '@@ -1 +1 @@\n-x\n+y\n' }]))!
    const el = mount(DiffView, { lines })
    expect(el.querySelector('.diff-del')!.textContent).toBe('-x\n')
    expect(el.querySelector('.diff-add')!.textContent).toBe('+y\n')
  })

  it('EntryView: a stopped action reads stopped, not failed; a write shows its file, not "written"', () => {
    const stopped = msg('terminal_run', 'Stopped before it finished.', [], 'failure')
    let el = mount(EntryView, { message: stopped, conversationId: 'c1', finished: true })
    expect(by(el, 'action-terminal_run')!.dataset.state).toBe('stopped')
    const w = msg('write_code', 'File a.py written successfully.', [{ path: 'a.py', content: 'x = 1\n', lines: 1 }], 'success', {
      filepath: 'a.py',
    })
    el = mount(EntryView, { message: w, conversationId: 'c1', finished: true })
    expect(by(el, 'code')!.textContent).toContain('x = 1')
    expect(el.textContent).not.toContain('written successfully')
    const running = msg('write_code', 'Writing a.py', [], 'running')
    el = mount(EntryView, { message: running, conversationId: 'c1', finished: false, waiting: true })
    expect(by(el, 'action-write_code')!.dataset.state).toBe('waiting')
  })
})

describe('waiting: a run that waits for the person has its own look', () => {
  function waitingTurn() {
    const plan = msg('plan', 'p', [
      { id: '1', title: 'One', description: '', requirement: '', status: 'completed' },
      { id: '2', title: 'Two', description: '', requirement: '', status: 'running' },
    ])
    const view = buildView([plan])
    markWaiting(view, 'r1', true)
    return view.turns[0]
  }

  it('is not finished; its running task waits; the bar says so', () => {
    const turn = waitingTurn()
    expect(turnStatus(turn)).toBe('waiting')
    expect(isTurnFinished(turn)).toBe(false)
    expect(shownTaskStatus(turn, turn.tasks![1], false)).toBe('waiting')
    const p = progress(turn)
    expect(p).toMatchObject({ completed: 1, waiting: 1, failed: 0, stopped: 0 })
    expect(progressText(p)).toBe('1 of 2 tasks done · waiting for you')
    const el = mount(PlanView, { turn, conversationId: 'c1', finished: false })
    expect(el.querySelector('.progress-bar[data-part="waiting"]')).not.toBeNull()
    expect(el.querySelectorAll('[data-testid="task"]')[1].getAttribute('data-status')).toBe('waiting')
  })

  it('StatusBadge: waiting amber, stopped grey, each apart from failed', () => {
    const cls = (status: string) => mount(StatusBadge, { status }).querySelector('.badge')!
    expect(cls('waiting').className).toContain('waiting')
    expect(cls('stopped').className).toContain('stopped')
    expect(cls('failed').className).toContain('bad')
    expect(cls('stopped').textContent).toBe('stopped')
  })
})
