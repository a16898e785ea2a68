import type {
  ConversationDetail,
  ConversationSummary,
  Message,
  Meta,
  RunInfo,
  UsageFigures,
  UsageSummary,
} from '../src/lib/types'

let seq = 0

export function resetSeq(): void {
  seq = 0
}

/** Our writer sends string task ids; the reducer also copes with numbers (kept as given). */
type FixtureMeta = Partial<Omit<Meta, 'task_id'>> & { task_id?: string | number | null }

export function msg(
  actionType: string,
  content = '',
  opts: Partial<Omit<Message, 'meta'>> & { meta?: FixtureMeta } = {},
): Message {
  seq += 1
  const { meta, ...rest } = opts
  return {
    role: actionType === 'question' ? 'user' : 'assistant',
    uuid: `u${seq}`,
    status: 'success',
    content,
    comments: '',
    memorized: '',
    timestamp: 1732200000000 + seq,
    type: '',
    conversation_id: 'c1',
    run_id: 'r1',
    seq,
    ...rest,
    meta: {
      pid: '',
      task_id: null,
      action_type: actionType,
      filepath: '',
      url: '',
      json: [],
      content: '',
      is_active: true,
      ...meta,
    } as Meta,
  }
}

/** A full agent run, in the order CONTRACT.md section 3 describes. */
export function fullRun(runId = 'r1'): Message[] {
  const o = { run_id: runId }
  const plan = [
    { id: '1', title: 'Write the script', description: 'hello.py', requirement: '', status: 'pending' },
    { id: '2', title: 'Run it', description: 'python3 hello.py', requirement: '', status: 'pending' },
  ]
  return [
    msg('question', 'Write hello.py and run it', o),
    msg('auto_reply', 'Sure, I will plan it.', o),
    msg('plan', '', { ...o, meta: { json: plan } }),
    msg('task', '', { ...o, status: 'running', meta: { task_id: '1', json: [{ ...plan[0], status: 'running' }] } }),
    msg('thinking', 'I should write the file first.', { ...o, meta: { task_id: '1' } }),
    msg('write_code', 'Writing hello.py', {
      ...o,
      uuid: 'a1',
      status: 'running',
      meta: { task_id: '1', filepath: 'hello.py', content: 'write_code hello.py' },
    }),
    msg('write_code', 'File hello.py written successfully.', {
      ...o,
      uuid: 'a1',
      meta: { task_id: '1', filepath: 'hello.py', content: 'write_code hello.py' },
    }),
    msg('read_file', 'print("hi")\n', {
      ...o,
      uuid: 'a2',
      meta: { task_id: '1', filepath: 'hello.py', content: 'read_file hello.py' },
    }),
    msg('finish', 'Wrote hello.py.', { ...o, meta: { task_id: '1' } }),
    msg('task', '', { ...o, meta: { task_id: '1', json: [{ ...plan[0], status: 'completed' }] } }),
    msg('task', '', { ...o, status: 'running', meta: { task_id: '2', json: [{ ...plan[1], status: 'running' }] } }),
    msg('terminal_run', 'python3 hello.py', {
      ...o,
      uuid: 'a3',
      status: 'running',
      meta: { task_id: '2', content: 'terminal_run: python3 hello.py' },
    }),
    msg('terminal_run', 'Exit code: 0\nstdout:\nhi\nstderr: (empty)', {
      ...o,
      uuid: 'a3',
      meta: { task_id: '2', content: 'terminal_run: python3 hello.py' },
    }),
    msg('browse_web', 'Fetched https://example.com', { ...o, meta: { task_id: '2' } }),
    msg('finish', 'It printed hi.', { ...o, meta: { task_id: '2' } }),
    msg('task', '', { ...o, meta: { task_id: '2', json: [{ ...plan[1], status: 'completed' }] } }),
    msg('finish_summery', '# Done\nWrote **hello.py**.', {
      ...o,
      meta: {
        json: [{ filepath: 'hello.py', filename: 'hello.py', url: '/api/files/c1/hello.py', filesize: 12 }],
      },
    }),
  ]
}

// The API's answers, whole (their types are generated from the server's models: api.gen.ts):
// a test serves what the server sends, never a part of it.
const NO_USAGE: UsageFigures = {
  calls: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  cost: null,
  input_tokens: 0,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 0,
  cost_usd: null,
}

/** Usage figures whose duplicate names agree (input_tokens = prompt_tokens, …). */
export function figuresOf(overrides: Partial<UsageFigures> = {}): UsageFigures {
  const f = { ...NO_USAGE, ...overrides }
  return {
    ...f,
    input_tokens: overrides.input_tokens ?? f.prompt_tokens,
    output_tokens: overrides.output_tokens ?? f.completion_tokens,
    cost_usd: overrides.cost_usd !== undefined ? overrides.cost_usd : f.cost,
  }
}

export function runOf(overrides: Partial<RunInfo> = {}): RunInfo {
  return {
    run_id: 'r1',
    conversation_id: 'c1',
    goal: 'the goal',
    mode: 'auto',
    runtime: 'local',
    status: 'completed',
    error: null,
    task_type: null,
    model: null,
    created_at: '2026-11-24T09:00:00+00:00',
    ended_at: null,
    owner: null,
    stop_requested: false,
    resumes: 0,
    repeated_calls: 0,
    mcp_servers: null,
    approval: 'never',
    can_ask: true,
    wait: null,
    total_tokens: 0,
    usage: NO_USAGE,
    ...overrides,
  }
}

export function summaryOf(overrides: Partial<ConversationSummary> = {}): ConversationSummary {
  return {
    conversation_id: 'c1',
    title: '',
    status: 'idle',
    created_at: '2026-11-24T09:00:00+00:00',
    updated_at: '2026-11-24T09:00:00+00:00',
    ...overrides,
  }
}

/** A conversation in detail; its totals are those of `usage` unless given. */
export function detailOf(overrides: Partial<ConversationDetail> = {}): ConversationDetail {
  const usage: UsageSummary = overrides.usage ?? { total: NO_USAGE, stages: {} }
  return {
    ...summaryOf(),
    runs: [],
    usage,
    prompt_tokens: usage.total.prompt_tokens,
    completion_tokens: usage.total.completion_tokens,
    total_tokens: usage.total.total_tokens,
    cost: usage.total.cost,
    input_tokens: usage.total.input_tokens,
    cached_input_tokens: usage.total.cached_input_tokens,
    cache_write_tokens: usage.total.cache_write_tokens,
    output_tokens: usage.total.output_tokens,
    cost_usd: usage.total.cost_usd,
    ...overrides,
  }
}
