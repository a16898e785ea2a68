// How an action with no card of its own shows its result: a generic card drawn from its
// declared shape. The shape is its ActionDef's payload models, as the wire's schema has them
// (messageSchema in message.gen.ts, made from the action registry by `make frontend-types`):
// one row per field, in the model's order, with the field's description as its hint. A new action
// is drawn so with nothing written here; a custom view (cards.ts, tools.ts) is optional.
// Pure, so it is unit-tested.

import { messageSchema as wire } from './message.gen'
import type { Message } from './types'

interface FieldSchema {
  type?: string
  description?: string
  title?: string
}
interface ModelSchema {
  title?: string
  properties?: Record<string, FieldSchema>
}
export interface WireSchema {
  $defs: Record<string, unknown>
}

export interface GenericField {
  name: string
  /** the field's description in its model, or '' */
  hint: string
  value: string
}
export interface GenericItem {
  model: string
  fields: GenericField[]
}

const VALUE_CAP = 2000 // characters of one field's value shown

function refName(ref: unknown): string {
  return typeof ref === 'string' ? ref.split('/').pop() || '' : ''
}

/** The models (by name) that messages of stream ``kind`` carry, as the schema says. */
export function modelsOf(kind: string, schema: WireSchema = wire as WireSchema): string[] {
  const payloads = schema.$defs.MetaPayloads as { properties?: Record<string, { items?: unknown }> }
  const items = payloads?.properties?.[kind]?.items as { $ref?: string; anyOf?: { $ref?: string }[] }
  if (!items) return []
  const refs = items.anyOf ? items.anyOf.map((r) => r.$ref) : [items.$ref]
  return refs.map(refName).filter(Boolean)
}

function shown(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2) ?? ''
  return text.length > VALUE_CAP ? `${text.slice(0, VALUE_CAP)} […]` : text
}

/** The first of ``models`` whose fields ``item`` has (each required one), else the first. */
function modelFor(item: Record<string, unknown>, models: string[], schema: WireSchema): string {
  const fits = models.find((name) => {
    const model = schema.$defs[name] as { required?: string[] } | undefined
    return (model?.required ?? []).every((key) => key in item)
  })
  return fits ?? models[0]
}

/** A finished message's items as rows of its kind's models, or null: running, a kind that
 *  declares no payload, or nothing carried. */
export function genericView(msg: Message, schema: WireSchema = wire as WireSchema): GenericItem[] | null {
  if (msg.status === 'running') return null
  const models = modelsOf(msg.meta?.action_type || '', schema)
  const json = msg.meta?.json
  if (!models.length || !Array.isArray(json)) return null
  const items: GenericItem[] = []
  for (const raw of json) {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) continue // a newer writer's
    const item = raw as Record<string, unknown>
    const name = modelFor(item, models, schema)
    const model = (schema.$defs[name] ?? {}) as ModelSchema
    const fields = Object.entries(model.properties ?? {})
      .filter(([key]) => key in item)
      .map(([key, field]) => ({ name: key, hint: field.description ?? '', value: shown(item[key]) }))
    if (fields.length) items.push({ model: model.title ?? name, fields })
  }
  return items.length ? items : null
}
