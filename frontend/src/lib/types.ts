// Wire shapes from docs/api.md "Routes" and "The stream".

// The message model is generated from the Python one (backend/messages/): see message.gen.ts.
export type { Message, MessageRole, MessageStatus, Meta } from './message.gen'
export { ActionType, MessageKind } from './message.gen'

// The API's answers are generated from the Python models too (backend/api/wire_types.py):
// see api.gen.ts. The UI reads exactly these fields, no others.
export type {
  ConversationDetail,
  ConversationSummary,
  DeltaEvent,
  EndEvent,
  Health,
  McpCall,
  PlanTask,
  ModelCheck,
  PreviewOut,
  RunInfo,
  ServerSettings,
  UsageFigures,
  UsageSummary,
} from './api.gen'
export type { FileEntry as FileInfo } from './api.gen'
import type { RunInfo } from './api.gen'

/** `waiting`: the run waits for the person (an approval, an answer); it is not over */
export type RunStatus = RunInfo['status']

export type Mode = 'auto' | 'agent' | 'chat'
