import { describe, expect, it } from 'vitest'
import { usageOf } from '../src/stores/app'
import { detailOf, figuresOf } from './fixtures'

describe('usageOf', () => {
  it('reads the totals GET /api/conversations/{id} returns: its usage.total', () => {
    const total = figuresOf({ calls: 3, prompt_tokens: 44, completion_tokens: 28, total_tokens: 72, cost: 0.0123 })
    const detail = detailOf({ usage: { total, stages: { planning: total } } })
    expect(usageOf(detail)).toEqual({ tokens: 72, promptTokens: 44, completionTokens: 28, cachedTokens: 0, cost: 0.0123 })
  })

  it('shows no cost when the server knows none (null), and zeros as zeros', () => {
    expect(usageOf(detailOf())).toEqual({ tokens: 0, promptTokens: 0, completionTokens: 0, cachedTokens: 0, cost: null })
  })

  it('reads only the shape the server sends: other wrappers and names are not guessed at', () => {
    const total = figuresOf({ calls: 1, prompt_tokens: 5, completion_tokens: 6, total_tokens: 11, cost: null })
    const guessed = { ...detailOf({ usage: { total, stages: {} } }), tokens: { total: 999 }, spent: 9 }
    expect(usageOf(guessed)).toEqual({ tokens: 11, promptTokens: 5, completionTokens: 6, cachedTokens: 0, cost: null })
  })

  it('reads the cached input tokens and the cost at the cached rates', () => {
    const total = figuresOf({ calls: 2, prompt_tokens: 1000, completion_tokens: 10, total_tokens: 1010, cached_input_tokens: 800, cost: 0.002 })
    const u = usageOf(detailOf({ usage: { total, stages: {} } }))
    expect([u.cachedTokens, u.cost]).toEqual([800, 0.002])
  })

  it('is empty without a conversation', () => {
    expect(usageOf(null)).toEqual({ tokens: null, promptTokens: null, completionTokens: null, cachedTokens: null, cost: null })
  })
})
