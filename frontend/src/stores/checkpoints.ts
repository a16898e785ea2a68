// The open conversation's checkpoints: which steps offer rewind and fork, what can be redone.

import { defineStore } from 'pinia'
import { computed, ref } from 'vue'
import { checkpointsApi, splitCheckpoints, type Checkpoint, type CheckpointDiff } from '../lib/checkpoints'
import { useApp } from './app'

export const useCheckpoints = defineStore('checkpoints', () => {
  const app = useApp()
  const list = ref<Checkpoint[]>([])
  const forId = ref('')
  const busy = ref(false)
  const diff = ref<CheckpointDiff | null>(null)

  const split = computed(() => splitCheckpoints(list.value, app.view.lastSeq ?? 0))
  const bySeq = computed(() => split.value.shown)
  const redo = computed(() => split.value.redo)

  async function load(): Promise<void> {
    const id = app.currentId
    if (!id) {
      list.value = []
      forId.value = ''
      return
    }
    try {
      const got = await checkpointsApi.list(id)
      if (id === app.currentId) {
        list.value = got
        forId.value = id
      }
    } catch {
      // an older server, or a transient error: no checkpoint buttons
    }
  }

  async function rewind(seq: number): Promise<void> {
    const id = app.currentId
    if (!id || busy.value) return
    busy.value = true
    try {
      await checkpointsApi.rewind(id, seq)
      await app.openConversation(id)
      await load()
    } catch (e) {
      app.error = (e as Error).message
    } finally {
      busy.value = false
    }
  }

  async function fork(seq: number): Promise<void> {
    const id = app.currentId
    if (!id || busy.value) return
    busy.value = true
    try {
      const made = await checkpointsApi.fork(id, seq)
      await app.loadConversations(true)
      await app.openConversation(made.conversation_id)
      await load()
    } catch (e) {
      app.error = (e as Error).message
    } finally {
      busy.value = false
    }
  }

  async function compare(seq: number, to: number | null = null): Promise<void> {
    const id = app.currentId
    if (!id) return
    try {
      diff.value = await checkpointsApi.diff(id, seq, to)
    } catch (e) {
      app.error = (e as Error).message
    }
  }

  return { list, forId, busy, bySeq, redo, diff, load, rewind, fork, compare }
})
