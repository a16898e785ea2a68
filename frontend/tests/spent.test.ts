// @vitest-environment jsdom
// What each run spent, beside it: tokens, the cached share of its input, the cost.
import { afterEach, describe, expect, it } from 'vitest'
import { createApp, h } from 'vue'
import { createPinia, setActivePinia } from 'pinia'
import { cachedShare, spentText, spentTitle, usageByRun } from '../src/lib/spent'
import { buildView } from '../src/lib/reducer'
import { useApp } from '../src/stores/app'
import TurnView from '../src/components/TurnView.vue'
import { detailOf, figuresOf, fullRun, runOf } from './fixtures'

const SPENT = figuresOf({
  calls: 4,
  prompt_tokens: 12_000,
  completion_tokens: 340,
  total_tokens: 12_340,
  cached_input_tokens: 9_600,
  cache_write_tokens: 1_200,
  cost: 0.01234,
})

describe('spentText', () => {
  it('says the tokens, the cached share of the input and the cost', () => {
    expect(cachedShare(SPENT)).toBeCloseTo(0.8)
    expect(spentText(SPENT)).toBe('12,340 tokens · 80% cached · $0.0123')
    expect(spentTitle(SPENT)).toContain('9,600 read from the provider')
    expect(spentTitle(SPENT)).toContain('1,200 written to it')
  })

  it('leaves out a cost the server does not know, and says nothing for a run without calls', () => {
    const unknown = figuresOf({ calls: 1, prompt_tokens: 10, total_tokens: 12, completion_tokens: 2, cost: null })
    expect(spentText(unknown)).toBe('12 tokens · 0% cached')
    expect(spentTitle(unknown)).toContain('cost unknown')
    expect(spentText(figuresOf())).toBe('')
    expect(spentText(undefined)).toBe('')
  })

  it('maps each run of a conversation to its own usage', () => {
    const other = figuresOf({ calls: 1, prompt_tokens: 5 })
    const detail = detailOf({ runs: [runOf({ run_id: 'r1', usage: SPENT }), runOf({ run_id: 'r2', usage: other })] })
    expect(usageByRun(detail)).toEqual({ r1: SPENT, r2: other })
    expect(usageByRun(null)).toEqual({})
  })
})

describe('TurnView', () => {
  const done: Array<() => void> = []
  afterEach(() => {
    while (done.length) done.pop()!()
  })

  it("shows the run's own spending beside it", () => {
    const pinia = createPinia()
    setActivePinia(pinia)
    const app = useApp()
    app.detail = detailOf({ runs: [runOf({ run_id: 'r1', usage: SPENT })] })
    const turn = buildView(fullRun('r1')).turns[0]
    const el = document.createElement('div')
    document.body.appendChild(el)
    const vue = createApp({ render: () => h(TurnView, { turn, conversationId: 'c1' }) })
    vue.use(pinia)
    vue.mount(el)
    done.push(() => {
      vue.unmount()
      el.remove()
    })
    const shown = el.querySelector('[data-testid="run-usage"]') as HTMLElement | null
    expect(shown?.textContent?.trim()).toBe('12,340 tokens · 80% cached · $0.0123')
  })
})
