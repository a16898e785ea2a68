// What a message carries in meta.json, as the server's models say (docs/api.md "What
// meta.json carries"): MetaPayloads, generated from backend/messages/payloads.py and each
// action's definition (message.gen.ts). The one place that reads meta.json's items; the
// cards, the reducer and the wait cards read their kind's items through it.

import type { Message, MetaPayloads } from './message.gen'

export type { MetaPayloads }
export type PayloadKind = keyof MetaPayloads
/** An item of kind ``K`` (e.g. ``ItemOf<'plan'>`` is a PlanTask). */
export type ItemOf<K extends PayloadKind> = MetaPayloads[K][number]

/** The items of ``msg``'s meta.json as its kind carries them; [] when ``msg`` is of another
 *  kind or carries none (a message cut short, stored before). Anything that is not an object
 *  (a newer writer's) is passed over. */
export function itemsOf<K extends PayloadKind>(msg: Message, kind: K): ItemOf<K>[] {
  const json = msg.meta?.json
  if (msg.meta?.action_type !== kind || !Array.isArray(json)) return []
  // the server sends this kind's items as its models (tests/messages/test_meta_payloads.py)
  return json.filter((item) => item !== null && typeof item === 'object') as ItemOf<K>[]
}

/** The first item of ``msg``'s meta.json when it is of ``kind``. */
export function firstOf<K extends PayloadKind>(msg: Message, kind: K): ItemOf<K> | undefined {
  return itemsOf(msg, kind)[0]
}
