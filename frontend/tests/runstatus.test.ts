import { beforeEach, describe, expect, it } from 'vitest'
import { applyEnd, applyRunStatus, buildView, isRunOpen, turnStatus } from '../src/lib/reducer'
import type { EndEvent, RunStatus } from '../src/lib/types'
import { fullRun, msg, resetSeq } from './fixtures'

// The run statuses are the server's (RunInfo.status, EndEvent.status in api.gen.ts): the UI
// reads them as they are and knows no others ('success', 'done', 'cancelled' are not sent).
const ALL: RunStatus[] = ['running', 'waiting', 'completed', 'failed', 'stopped']

beforeEach(() => resetSeq())

describe('a run status as the server sends it', () => {
  it('running and waiting are open, the others are an end the turn shows', () => {
    expect(ALL.filter(isRunOpen)).toEqual(['running', 'waiting'])
    for (const status of ALL) {
      const view = buildView(fullRun())
      applyRunStatus(view, 'r1', status)
      expect(view.turns[0].endStatus).toBe(isRunOpen(status) ? null : status)
    }
  })

  it("the stream's end sets the turn's status to the one it names", () => {
    for (const status of ['completed', 'failed', 'stopped'] as const) {
      const view = buildView(fullRun())
      const end: EndEvent = { conversation_id: 'c1', run_id: 'r1', status }
      applyEnd(view, end)
      expect(turnStatus(view.turns[0])).toBe(status)
    }
  })

  it('a status the server never sends does not type-check', () => {
    const view = buildView(fullRun())
    // @ts-expect-error 'success' is a message status, never a run's
    applyRunStatus(view, 'r1', 'success')
    // @ts-expect-error nor is 'cancelled'
    const end: EndEvent = { conversation_id: 'c1', run_id: 'r1', status: 'cancelled' }
    expect(end.run_id).toBe('r1')
  })
})

describe('a task status as the server sends it (PlanTask.status)', () => {
  const task = { id: '1', title: 'Write it', description: '', requirement: '' }

  it('reads pending, running, completed and failed as they are', () => {
    for (const status of ['pending', 'running', 'completed', 'failed'] as const) {
      const view = buildView([msg('plan', '', { meta: { json: [{ ...task, status }] } })])
      expect(view.turns[0].tasks?.[0].status).toBe(status)
    }
  })

  it('guesses no other words: a status the server never sends is no status', () => {
    for (const status of ['success', 'done', 'failure', 'error']) {
      const view = buildView([msg('plan', '', { meta: { json: [{ ...task, status }] } })])
      expect(view.turns[0].tasks?.[0].status).toBe('pending')
    }
  })
})
