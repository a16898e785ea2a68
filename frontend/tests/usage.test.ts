import { describe, expect, it } from 'vitest'
import { usageOf } from '../src/stores/app'
import { detailOf, figuresOf } from './fixtures'

describe('usageOf', () => {
  it('reads the totals GET /api/conversations/{id} returns: its usage.total', () => {
    const total = figuresOf({ calls: 3, prompt_tokens: 44, completion_tokens: 28, total_tokens: 72, cost: 0.0123 })
    const detail = detailOf({ usage: { total, stages: { planning: total } } })
    expect(usageOf(detail)).toEqual({ tokens: 72, promptTokens: 44, completionTokens: 28, cost: 0.0123 })
  })

  it('shows no cost when the server knows none (null), and zeros as zeros', () => {
    expect(usageOf(detailOf())).toEqual({ tokens: 0, promptTokens: 0, completionTokens: 0, cost: null })
  })

  it('reads only the shape the server sends: other wrappers and names are not guessed at', () => {
    const total = figuresOf({ calls: 1, prompt_tokens: 5, completion_tokens: 6, total_tokens: 11, cost: null })
    const guessed = { ...detailOf({ usage: { total, stages: {} } }), tokens: { total: 999 }, spent: 9 }
    expect(usageOf(guessed)).toEqual({ tokens: 11, promptTokens: 5, completionTokens: 6, cost: null })
  })

  it('is empty without a conversation', () => {
    expect(usageOf(null)).toEqual({ tokens: null, promptTokens: null, completionTokens: null, cost: null })
  })
})
