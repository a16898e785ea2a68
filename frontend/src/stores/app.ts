import { defineStore } from 'pinia'
import { computed, ref, shallowRef } from 'vue'
import { api, HttpError, uploadFiles, type RunBody } from '../lib/api'
import {
  applyFailed,
  applyProgress,
  applyUploaded,
  newAttachments,
  planUploads,
  type Attachment,
} from '../lib/attachments'
import {
  applyDelta,
  applyEnd,
  applyRunStatus,
  buildView,
  emptyView,
  isRunOpen,
  markWaiting,
  reduce,
  type ConversationView,
} from '../lib/reducer'
import { RunFollower } from '../lib/sse'
import type { ApprovalMode } from '../lib/waits'
import { latestRunModel, modelsByRun, sidebarConversations } from '../lib/runmodel'
import { usageByRun } from '../lib/spent'
import type {
  ConversationDetail,
  ConversationSummary,
  Health,
  Mode,
  ModelCheck,
  ServerSettings,
} from '../lib/types'

export type Connection = 'idle' | 'connecting' | 'live' | 'reconnecting' | 'closed'

export interface PreviewTarget {
  conversationId: string
  filepath: string
  filename: string
  url?: string
}

export interface Usage {
  tokens: number | null
  promptTokens: number | null
  completionTokens: number | null
  /** of promptTokens: those the provider's prompt cache served */
  cachedTokens: number | null
  cost: number | null
}

/** Token totals and cost of GET /api/conversations/{id}: its `usage.total`. */
export function usageOf(d: ConversationDetail | null): Usage {
  if (!d) return { tokens: null, promptTokens: null, completionTokens: null, cachedTokens: null, cost: null }
  const total = d.usage.total
  return {
    tokens: total.total_tokens,
    promptTokens: total.prompt_tokens,
    completionTokens: total.completion_tokens,
    cachedTokens: total.cached_input_tokens,
    cost: total.cost_usd,
  }
}

/** Call `fn` at most once per `ms`, the last call always landing (trailing edge). */
export function throttle(fn: () => void, ms: number): () => void {
  let last = 0
  let timer: ReturnType<typeof setTimeout> | null = null
  return () => {
    const wait = last + ms - Date.now()
    if (wait <= 0) {
      last = Date.now()
      fn()
    } else if (!timer) {
      timer = setTimeout(() => {
        timer = null
        last = Date.now()
        fn()
      }, wait)
    }
  }
}

export function readHash(): string | null {
  const m = /^#\/c\/([^/?#]+)/.exec(window.location.hash)
  return m ? decodeURIComponent(m[1]) : null
}

function writeHash(id: string | null): void {
  const want = id ? `#/c/${encodeURIComponent(id)}` : ''
  if (window.location.hash === want || (!id && !window.location.hash)) return
  const url = window.location.pathname + window.location.search + want
  history.replaceState(null, '', url)
}

export const useApp = defineStore('app', () => {
  const health = ref<Health | null>(null)
  const conversations = ref<ConversationSummary[]>([])
  const currentId = ref<string | null>(null)
  const view = ref<ConversationView>(emptyView())
  const detail = ref<ConversationDetail | null>(null)
  const activeRunId = ref<string | null>(null)
  const connection = ref<Connection>('idle')
  const error = ref<string | null>(null)
  const loading = ref(false)
  const preview = ref<PreviewTarget | null>(null)
  const follower = shallowRef<RunFollower | null>(null)
  const settings = ref<ServerSettings | null>(null)
  const settingsLoaded = ref(false)
  const model = ref<string | null>(null)
  const checking = ref(false)
  const check = ref<ModelCheck | null>(null)
  const query = ref('')
  const attachments = ref<Attachment[]>([])
  /** files in the current conversation's workspace (null: not known yet) */
  const fileCount = ref<number | null>(null)
  /** the conversation attach() made for files, until a goal is sent in it */
  const draftId = ref<string | null>(null)
  let generation = 0
  let detailTimer: ReturnType<typeof setInterval> | null = null

  /** the runtimes this server offers (GET /api/settings), in its order */
  const runtimes = computed(() => settings.value?.runtimes ?? [])
  /** the runtime a run gets when it names none (RUNTIME): the composer starts from it */
  const defaultRuntime = computed(() => {
    const named = settings.value?.runtime
    return named && runtimes.value.includes(named) ? named : (runtimes.value[0] ?? '')
  })
  const models = computed(() => settings.value?.models ?? [])
  /** no model configured: the first-run screen explains .env */
  const needsSetup = computed(() => settings.value !== null && !settings.value.model)
  const uploading = computed(() => attachments.value.some((a) => a.state === 'uploading'))
  const showRuntime = computed(() => runtimes.value.length > 1)
  const running = computed(() => activeRunId.value !== null)
  const usage = computed(() => usageOf(detail.value))
  /** run_id → the model it ran with (a run that named none used the server default) */
  const runModels = computed(() => modelsByRun(detail.value, settings.value?.model ?? null))
  const runUsage = computed(() => usageByRun(detail.value))
  const hasFiles = computed(() => (fileCount.value ?? 0) > 0)
  /** the sidebar's list: conversations made only for attachments and left are not listed */
  const listed = computed(() => sidebarConversations(conversations.value, currentId.value))
  const title = computed(() => {
    const c = conversations.value.find((x) => x.conversation_id === currentId.value)
    return c?.title || detail.value?.title || ''
  })

  function showError(e: unknown): void {
    if (e instanceof HttpError) error.value = e.message
    else if (e instanceof Error) error.value = e.message
    else error.value = String(e)
  }

  async function loadHealth(): Promise<void> {
    try {
      health.value = await api.health()
    } catch (e) {
      showError(e)
    }
  }

  let settingsPending: Promise<void> | null = null
  function loadSettings(): Promise<void> {
    settingsPending = fetchSettings()
    return settingsPending
  }
  async function fetchSettings(): Promise<void> {
    try {
      settings.value = await api.settings()
      if (!model.value || !settings.value.models.includes(model.value)) {
        model.value = settings.value.model
      }
    } catch {
      /* an older server without /api/settings: no model picker, nothing else lost */
    } finally {
      settingsLoaded.value = true
    }
  }

  async function checkModel(): Promise<void> {
    checking.value = true
    check.value = null
    const asked = model.value
    try {
      const res = await api.checkModel(asked)
      check.value = { ...res, model: res.model || asked }
    } catch (e) {
      check.value = {
        ok: false,
        model: asked,
        latency_ms: 0,
        error: e instanceof Error ? e.message : String(e),
      }
    } finally {
      checking.value = false
    }
  }

  async function loadConversations(silent = false): Promise<void> {
    try {
      const q = query.value
      const list = await api.conversations(q)
      if (q !== query.value) return // a newer search is on its way
      conversations.value = Array.isArray(list) ? list : []
    } catch (e) {
      if (!silent) showError(e)
    }
  }

  async function refreshFiles(): Promise<void> {
    const id = currentId.value
    if (!id) {
      fileCount.value = null
      return
    }
    try {
      const list = await api.files(id)
      if (id === currentId.value) fileCount.value = Array.isArray(list) ? list.length : 0
    } catch {
      /* transient; the next refresh will try again */
    }
  }

  async function refreshDetail(): Promise<void> {
    const id = currentId.value
    if (!id) return
    void refreshFiles()
    try {
      const d = await api.conversation(id)
      if (id !== currentId.value) return
      detail.value = d
      for (const r of d.runs) {
        if (r.run_id !== activeRunId.value) applyRunStatus(view.value, r.run_id, r.status)
      }
    } catch {
      /* transient; the next refresh will try again */
    }
  }

  const refreshSoon = throttle(() => void refreshDetail(), 1000)

  function startDetailTimer(): void {
    stopDetailTimer()
    detailTimer = setInterval(() => void refreshDetail(), 4000)
  }
  function stopDetailTimer(): void {
    if (detailTimer) clearInterval(detailTimer)
    detailTimer = null
  }

  function detach(): void {
    generation++
    follower.value?.abort()
    follower.value = null
    activeRunId.value = null
    connection.value = 'idle'
    stopDetailTimer()
  }

  function follow(
    gen: number,
    open: (attempt: number, after: number | null, runId: string | null) => Promise<Response>,
    runId: string | null,
    after: number | undefined,
  ): void {
    const f = new RunFollower({
      open,
      runId,
      after,
      idleTimeout: 60000,
      handlers: {
        onStart({ runId: rid, conversationId }) {
          if (gen !== generation) return
          activeRunId.value = rid
          if (!currentId.value && conversationId) {
            currentId.value = conversationId
            writeHash(conversationId)
          }
          void loadConversations()
          void refreshDetail()
        },
        onMessage(msg) {
          if (gen !== generation) return
          // token totals follow the run as it goes, not only every few seconds
          refreshSoon()
          if (!currentId.value && msg.conversation_id) {
            currentId.value = msg.conversation_id
            writeHash(msg.conversation_id)
          }
          reduce(view.value, msg)
        },
        onDelta(delta) {
          if (gen !== generation) return
          const rid = follower.value?.runId ?? activeRunId.value
          if (rid && rid !== 'pending') applyDelta(view.value, rid, delta)
        },
        onEnd(end) {
          if (gen !== generation) return
          if (end) applyEnd(view.value, end)
          activeRunId.value = null
          stopDetailTimer()
          void refreshDetail()
          void loadConversations()
        },
        onState(s) {
          if (gen !== generation) return
          connection.value = s === 'closed' ? 'idle' : s
        },
        onError(err) {
          if (gen !== generation) return
          activeRunId.value = null
          showError(err)
        },
      },
    })
    follower.value = f
    startDetailTimer()
    f.run().catch(() => {
      /* reported through onError */
    })
  }

  /** Delete the conversation attach() made when it is left without a goal ever sent:
   * it holds nothing but the files the person walked away from. */
  function discardDraft(): void {
    const id = draftId.value
    draftId.value = null
    if (!id || id !== currentId.value || view.value.turns.length || uploading.value) return
    conversations.value = conversations.value.filter((c) => c.conversation_id !== id)
    api.deleteConversation(id).catch(() => {
      /* it stays, unlisted: the sidebar leaves out untitled conversations without a run */
    })
  }

  async function openConversation(id: string): Promise<void> {
    if (id === currentId.value && (activeRunId.value || loading.value)) return
    if (id !== currentId.value) {
      discardDraft()
      attachments.value = []
    }
    detach()
    const gen = generation
    currentId.value = id
    writeHash(id)
    view.value = emptyView()
    detail.value = null
    fileCount.value = null
    error.value = null
    loading.value = true
    void refreshFiles()
    try {
      // detail first: if it says no run is active, the messages fetched after are complete
      const d = await api.conversation(id)
      if (gen !== generation) return
      detail.value = d
      // the picker shows the model this conversation last ran with, not the default
      const last = latestRunModel(d, settings.value?.model ?? null, models.value)
      if (last) {
        model.value = last
        check.value = null
      }
      const msgs = await api.messages(id)
      if (gen !== generation) return
      const v = buildView(Array.isArray(msgs) ? msgs : [])
      let active: string | null = null
      for (const r of d.runs) {
        if (isRunOpen(r.status)) active = r.run_id
        else applyRunStatus(v, r.run_id, r.status)
        markWaiting(v, r.run_id, r.status === 'waiting')
      }
      // a fork's history (backend/checkpoints) has runs of the conversation it came from:
      // they ran there and go on nowhere
      const own = new Set(d.runs.map((r) => r.run_id))
      for (const t of v.turns) if (t.runId && !own.has(t.runId)) applyRunStatus(v, t.runId, 'completed')
      view.value = v
      if (active) {
        activeRunId.value = active
        const rid = active
        follow(gen, (_a, after) => api.events(rid, after, follower.value?.signal), rid, v.lastSeq)
      }
    } catch (e) {
      if (gen !== generation) return
      if (e instanceof HttpError && e.status === 404) {
        error.value = 'That conversation does not exist (any more).'
        currentId.value = null
        writeHash(null)
      } else showError(e)
    } finally {
      if (gen === generation) loading.value = false
    }
  }

  function newConversation(): void {
    discardDraft()
    detach()
    attachments.value = []
    check.value = null
    currentId.value = null
    view.value = emptyView()
    detail.value = null
    fileCount.value = null
    error.value = null
    writeHash(null)
  }

  /** ``approval``: the mode picked for this run (stores/waits.ts), null for the server's */
  async function send(
    goal: string,
    mode: Mode,
    runtime: string | null,
    approval: ApprovalMode | null = null,
  ): Promise<void> {
    const text = goal.trim()
    if (!text || running.value) return
    error.value = null
    detach()
    const gen = generation
    const body: RunBody = { goal: text, mode }
    if (currentId.value) body.conversation_id = currentId.value
    draftId.value = null // a goal was sent: no longer a draft
    // the runtime shown is the one sent, even when it is the only one offered
    if (runtime && runtimes.value.includes(runtime)) body.runtime = runtime
    if (model.value && models.value.length > 1) body.model = model.value
    if (approval) body.approval = approval
    attachments.value = attachments.value.filter((a) => a.state === 'uploading')
    activeRunId.value = 'pending'
    follow(
      gen,
      (attempt, after, runId) =>
        attempt === 0 || !runId
          ? api.startRun(body, follower.value?.signal)
          : api.events(runId, after, follower.value?.signal),
      null,
      undefined,
    )
  }

  /** Run a failed or stopped run's goal again, in the same conversation. */
  function retry(runId: string): void {
    if (running.value || !runId) return
    error.value = null
    detach()
    const gen = generation
    const picked = models.value.length > 1 ? model.value : null
    activeRunId.value = 'pending'
    follow(
      gen,
      (attempt, after, rid) =>
        attempt === 0 || !rid
          ? api.retry(runId, picked, follower.value?.signal)
          : api.events(rid, after, follower.value?.signal),
      null,
      undefined,
    )
  }

  async function rename(id: string, title: string): Promise<boolean> {
    const t = title.trim()
    if (!t) return false
    try {
      await api.renameConversation(id, t)
      const c = conversations.value.find((x) => x.conversation_id === id)
      if (c) c.title = t
      if (id === currentId.value && detail.value) detail.value = { ...detail.value, title: t }
      return true
    } catch (e) {
      showError(e)
      return false
    }
  }

  async function search(q: string): Promise<void> {
    query.value = q
    await loadConversations()
  }

  /** Upload files now (a new, empty conversation is made first when there is none). */
  async function attach(files: File[], dir = ''): Promise<void> {
    if (!files.length) return
    if (running.value) {
      error.value = 'Files can be attached when the run has ended.'
      return
    }
    // files picked while the page loads wait for the upload limit, so one big file is
    // refused alone instead of failing the batch it would have joined
    if (!settingsLoaded.value && settingsPending) await settingsPending
    const plan = planUploads(files, settings.value?.upload_max_mb)
    for (const { file, reason } of plan.refused) {
      const [chip] = newAttachments([file])
      applyFailed([chip], reason)
      attachments.value.push(chip)
    }
    for (const part of plan.batches) {
      attachments.value.push(...newAttachments(part))
      const batch = attachments.value.slice(-part.length)
      try {
        let id = currentId.value
        if (!id) {
          id = (await api.createConversation()).conversation_id
          currentId.value = id
          draftId.value = id
          writeHash(id)
          void loadConversations()
        }
        const result = await uploadFiles(id, part, {
          dir,
          onProgress: (p) => applyProgress(batch, p.loaded, p.total),
        })
        applyUploaded(batch, result)
        void refreshFiles()
      } catch (e) {
        applyFailed(batch, e instanceof Error ? e.message : String(e))
      }
    }
  }

  function dismissAttachment(id: number): void {
    attachments.value = attachments.value.filter((a) => a.id !== id)
    if (attachments.value.length || !draftId.value || draftId.value !== currentId.value) return
    // every chip of a conversation made only for them is gone: so is the conversation
    discardDraft()
    currentId.value = null
    detail.value = null
    fileCount.value = null
    writeHash(null)
  }

  async function stop(): Promise<void> {
    const rid = activeRunId.value
    if (!rid || rid === 'pending') return
    try {
      await api.stop(rid)
    } catch (e) {
      showError(e)
    }
  }

  async function deleteConversation(id: string): Promise<void> {
    try {
      await api.deleteConversation(id)
      if (id === currentId.value) newConversation()
      conversations.value = conversations.value.filter((c) => c.conversation_id !== id)
      await loadConversations()
    } catch (e) {
      showError(e)
    }
  }

  async function init(): Promise<void> {
    await Promise.all([loadHealth(), loadSettings(), loadConversations()])
    const id = readHash()
    if (id) await openConversation(id)
    // keep the sidebar's statuses fresh (other tabs, other runs)
    setInterval(() => {
      if (document.visibilityState === 'visible') void loadConversations(true)
    }, 10000)
    window.addEventListener('hashchange', () => {
      const h = readHash()
      if (h && h !== currentId.value) void openConversation(h)
      else if (!h && currentId.value) newConversation()
    })
  }

  return {
    health,
    conversations,
    currentId,
    view,
    detail,
    activeRunId,
    connection,
    error,
    loading,
    preview,
    runtimes,
    defaultRuntime,
    showRuntime,
    running,
    usage,
    title,
    runModels,
    runUsage,
    hasFiles,
    fileCount,
    listed,
    init,
    loadConversations,
    openConversation,
    newConversation,
    send,
    stop,
    deleteConversation,
    refreshDetail,
    settings,
    settingsLoaded,
    model,
    models,
    needsSetup,
    checking,
    check,
    checkModel,
    loadSettings,
    query,
    search,
    rename,
    retry,
    attachments,
    uploading,
    attach,
    dismissAttachment,
  }
})
