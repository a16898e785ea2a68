import { describe, expect, it } from 'vitest'
import { usageOf } from '../src/stores/app'

describe('usageOf', () => {
  it('reads the totals GET /api/conversations/{id} returns', () => {
    const detail = {
      conversation_id: 'c1',
      status: 'completed',
      prompt_tokens: 44,
      completion_tokens: 28,
      total_tokens: 72,
      cost: null,
      usage: { total: { calls: 3, prompt_tokens: 44, completion_tokens: 28, total_tokens: 72, cost: null } },
    }
    expect(usageOf(detail)).toEqual({ tokens: 72, promptTokens: 44, completionTokens: 28, cost: null })
  })

  it('shows the cost when known and sums in/out when no total is given', () => {
    expect(
      usageOf({ conversation_id: 'c', status: 'x', usage: { prompt_tokens: 5, completion_tokens: 6, cost: 0.0123 } }),
    ).toEqual({ tokens: 11, promptTokens: 5, completionTokens: 6, cost: 0.0123 })
  })

  it('is empty without a conversation', () => {
    expect(usageOf(null).tokens).toBeNull()
  })
})
