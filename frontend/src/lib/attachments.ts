// Files attached in the composer: one chip each, with upload progress. Pure, unit-tested.

import type { FileInfo } from './types'

export type AttachmentState = 'uploading' | 'done' | 'failed'

export interface Attachment {
  id: number
  name: string
  size: number
  state: AttachmentState
  /** 0..1 while uploading */
  progress: number
  error: string
  /** workspace path once uploaded */
  filepath: string
}

let nextId = 1

export function newAttachments(files: { name: string; size: number }[]): Attachment[] {
  return files.map((f) => ({
    id: nextId++,
    name: f.name,
    size: f.size,
    state: 'uploading',
    progress: 0,
    error: '',
    filepath: '',
  }))
}

/** Progress of one upload request spread over the chips it carries. */
export function applyProgress(batch: Attachment[], loaded: number, total: number): void {
  const fraction = total > 0 ? Math.min(1, loaded / total) : 0
  for (const a of batch) if (a.state === 'uploading') a.progress = fraction
}

export function applyUploaded(batch: Attachment[], result: FileInfo[]): void {
  for (const a of batch) {
    const hit = result.find((r) => r.filename === a.name)
    a.state = 'done'
    a.progress = 1
    a.filepath = hit?.filepath ?? a.name
  }
}

export function applyFailed(batch: Attachment[], message: string): void {
  for (const a of batch) {
    a.state = 'failed'
    a.error = message
  }
}

/** How a drop of files is sent: a file over the server's UPLOAD_MAX_MB is refused alone (the
 * others still go), and the rest go in requests that each stay under the limit. */
export interface UploadPlan<F> {
  refused: { file: F; reason: string }[]
  batches: F[][]
}

export function planUploads<F extends { name: string; size: number }>(
  files: F[],
  maxMb: number | undefined,
): UploadPlan<F> {
  if (!maxMb) return { refused: [], batches: files.length ? [files] : [] }
  const limit = maxMb * 1024 * 1024
  const refused: { file: F; reason: string }[] = []
  const batches: F[][] = []
  let batch: F[] = []
  let size = 0
  for (const f of files) {
    if (f.size > limit) {
      refused.push({ file: f, reason: `${f.name} is larger than the server's upload limit (${maxMb} MB).` })
      continue
    }
    if (batch.length && size + f.size > limit) {
      batches.push(batch)
      batch = []
      size = 0
    }
    batch.push(f)
    size += f.size
  }
  if (batch.length) batches.push(batch)
  return { refused, batches }
}

/** A line the goal can carry so the person sees which files the run was given. */
export function describeAttached(list: Attachment[]): string {
  const done = list.filter((a) => a.state === 'done').map((a) => a.filepath || a.name)
  return done.length ? `Attached: ${done.join(', ')}` : ''
}
