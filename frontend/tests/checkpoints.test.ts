// @vitest-environment jsdom
// Checkpoints in the UI: which steps offer rewind and fork, what a rewind left to redo, the
// diff view's lines, the shared page's token, and the checkpoint bar's buttons.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createApp, h, nextTick, type Component } from 'vue'
import { createPinia, setActivePinia } from 'pinia'
import {
  diffLines,
  sharedToken,
  splitCheckpoints,
  type Checkpoint,
} from '../src/lib/checkpoints'
import CheckpointBar from '../src/components/CheckpointBar.vue'
import { useApp } from '../src/stores/app'
import { useCheckpoints } from '../src/stores/checkpoints'

function cp(seq: number, files = 1): Checkpoint {
  return { seq, run_id: 'r', created_at: null, label: `step ${seq}`, files_changed: files }
}

describe('splitCheckpoints', () => {
  it('offers the steps in the history and leaves the rewound ones to redo', () => {
    const { shown, redo } = splitCheckpoints([cp(3), cp(6), cp(9)], 6)
    expect([...shown.keys()]).toEqual([3, 6])
    expect(redo.map((c) => c.seq)).toEqual([9])
    expect(splitCheckpoints([cp(3)], 0).shown.size).toBe(0)
  })
})

describe('diffLines', () => {
  it('marks added, removed, header and context lines', () => {
    const lines = diffLines('--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n')
    expect(lines.map((l) => l.kind)).toEqual(['hunk', 'hunk', 'hunk', 'del', 'add', 'ctx'])
    expect(lines[3].text).toBe('-old')
  })
})

describe('sharedToken', () => {
  it('reads the token of a shared page and nothing else', () => {
    expect(sharedToken('/shared/abc_-9')).toBe('abc_-9')
    expect(sharedToken('/shared/abc/')).toBe('abc')
    expect(sharedToken('/shared/')).toBeNull()
    expect(sharedToken('/shared/a/b')).toBeNull()
    expect(sharedToken('/')).toBeNull()
  })
})

const unmounts: (() => void)[] = []
afterEach(() => {
  unmounts.splice(0).forEach((u) => u())
  vi.unstubAllGlobals()
})

function mountBar(seq: number) {
  const el = document.createElement('div')
  document.body.appendChild(el)
  const pinia = createPinia()
  setActivePinia(pinia)
  const app = createApp({ render: () => h(CheckpointBar as Component, { seq }) })
  app.use(pinia)
  app.mount(el)
  unmounts.push(() => {
    app.unmount()
    el.remove()
  })
  return el
}

describe('CheckpointBar', () => {
  it('shows nothing for a step without a checkpoint', async () => {
    const el = mountBar(4)
    await nextTick()
    expect(el.querySelector('[data-testid="checkpoint"]')).toBeNull()
  })

  it('rewinds through the API and reloads the conversation; no rewind while a run is on', async () => {
    const el = mountBar(4)
    const store = useApp()
    const cps = useCheckpoints()
    store.currentId = 'c1'
    store.view.lastSeq = 10
    cps.list = [cp(4, 2)]
    await nextTick()
    const bar = el.querySelector('[data-testid="checkpoint"]') as HTMLElement
    expect(bar.textContent).toContain('2 files changed')
    const calls: [string, RequestInit | undefined][] = []
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init?: RequestInit) => {
        calls.push([url, init])
        const body = url.endsWith('/checkpoints') ? [cp(4, 2)] : { seq: 4, files: 1 }
        return new Response(JSON.stringify(body), {
          status: 200,
          headers: { 'Content-Type': 'application/json' },
        })
      }),
    )
    const open = vi.spyOn(store, 'openConversation').mockResolvedValue()
    ;(el.querySelector('[data-testid="checkpoint-rewind"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(open).toHaveBeenCalledWith('c1'))
    expect(calls[0][0]).toBe('/api/conversations/c1/rewind')
    expect(calls[0][1]?.method).toBe('POST')
    expect(JSON.parse(String(calls[0][1]?.body))).toEqual({ seq: 4 })
    await vi.waitFor(() => expect(cps.busy).toBe(false))
    store.activeRunId = 'run-1' // a run is on: rewinding is offered no more
    await nextTick()
    const rewind = el.querySelector('[data-testid="checkpoint-rewind"]') as HTMLButtonElement
    expect(rewind.disabled).toBe(true)
    expect((el.querySelector('[data-testid="checkpoint-fork"]') as HTMLButtonElement).disabled).toBe(false)
  })
})
