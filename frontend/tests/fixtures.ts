import type { Message, Meta } from '../src/lib/types'

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
