// Wire shapes from docs/api.md "Routes" and "The stream".

// The message model is generated from the Python one (backend/messages/): see message.gen.ts.
export type { Message, MessageRole, MessageStatus, Meta } from './message.gen'
export { ActionType, MessageKind } from './message.gen'

/** `waiting`: the run waits for the person (an approval, an answer); it is not over */
export type RunStatus = 'running' | 'waiting' | 'completed' | 'failed' | 'stopped'

export interface EndEvent {
  conversation_id: string
  run_id: string
  status: RunStatus | string
}

export interface FileInfo {
  filepath: string
  filename: string
  url: string
  filesize: number
}

export interface ConversationSummary {
  conversation_id: string
  title: string
  status: string
  created_at: string | number
  updated_at: string | number
}

export interface RunInfo {
  run_id: string
  status: string
  [key: string]: unknown
}

export interface ConversationDetail extends Partial<ConversationSummary> {
  conversation_id: string
  status: string
  runs?: RunInfo[]
  [key: string]: unknown
}

export interface Health {
  status: string
  runtimes?: string[]
}

export type Mode = 'auto' | 'agent' | 'chat'

/** GET /api/settings */
export interface ServerSettings {
  model: string | null
  models: string[]
  /** runtimes: the one a run gets when it names none (RUNTIME); the composer starts from it */
  runtime?: string
  runtimes: string[]
  auth: boolean
  upload_max_mb?: number
  workspace_max_mb?: number
  /** the server's default approval mode (APPROVAL_MODE) and the modes a run may pick */
  approval?: string
  approval_modes?: string[]
}

/** POST /api/llm/check */
export interface ModelCheck {
  ok: boolean
  model?: string | null
  latency_ms: number
  error?: string
}
