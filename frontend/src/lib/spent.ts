// What a run spent, as shown beside it: tokens, the share of its input the provider's prompt
// cache served, and the cost at the provider's cached rates (GET /api/conversations/{id}:
// runs[].usage).

import type { ConversationDetail, UsageFigures } from './types'

/** run_id → what that run spent. */
export function usageByRun(detail: ConversationDetail | null): Record<string, UsageFigures> {
  const out: Record<string, UsageFigures> = {}
  for (const r of detail?.runs ?? []) if (r.run_id && r.usage) out[r.run_id] = r.usage
  return out
}

/** The share of input tokens read from the provider's cache (0 with no input). */
export function cachedShare(u: UsageFigures): number {
  return u.input_tokens > 0 ? u.cached_input_tokens / u.input_tokens : 0
}

export function costText(cost: number | null): string {
  if (cost === null) return ''
  return cost < 1 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`
}

/** `12,340 tokens · 80% cached · $0.0123`; empty when the run made no model call. */
export function spentText(u: UsageFigures | undefined): string {
  if (!u || u.calls === 0) return ''
  const parts = [`${u.total_tokens.toLocaleString('en-US')} tokens`]
  parts.push(`${Math.round(cachedShare(u) * 100)}% cached`)
  const cost = costText(u.cost_usd)
  if (cost) parts.push(cost)
  return parts.join(' · ')
}

/** The same in full, for the tooltip. */
export function spentTitle(u: UsageFigures | undefined): string {
  if (!u || u.calls === 0) return ''
  const n = (x: number) => x.toLocaleString('en-US')
  const cost = u.cost_usd === null ? 'cost unknown (no price for the model)' : `${costText(u.cost_usd)} at the provider's cached rates`
  return (
    `This run: ${n(u.calls)} model calls, ${n(u.input_tokens)} input tokens ` +
    `(${n(u.cached_input_tokens)} read from the provider's cache, ${n(u.cache_write_tokens)} written to it), ` +
    `${n(u.output_tokens)} output tokens; ${cost}`
  )
}
