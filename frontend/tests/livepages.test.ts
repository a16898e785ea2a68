// @vitest-environment jsdom
// An HTML page of the workspace opens live (scripts on, on the preview origin) from the
// summary (components/SummaryView.vue): its `preview_url` in the file listing, in a new tab
// that gets no opener and no referrer; other files get no such link.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createApp, h, nextTick, type Component } from 'vue'
import { createPinia, setActivePinia } from 'pinia'
import SummaryView from '../src/components/SummaryView.vue'
import { msg } from './fixtures'

const unmounts: (() => void)[] = []
afterEach(() => {
  unmounts.splice(0).forEach((u) => u())
  vi.unstubAllGlobals()
})

const LISTING = [
  { filepath: 'site/index.html', filename: 'index.html', url: '/api/files/c1/site/index.html', filesize: 10, preview_url: 'http://tok.localhost:8002/site/index.html' },
  { filepath: 'app.py', filename: 'app.py', url: '/api/files/c1/app.py', filesize: 5 },
]

async function mountSummary(): Promise<HTMLElement> {
  vi.stubGlobal('fetch', async (url: string) => {
    expect(url).toBe('/api/conversations/c1/files')
    return new Response(JSON.stringify(LISTING), { headers: { 'content-type': 'application/json' } })
  })
  const summary = msg('finish_summery', '# Done', {
    meta: { json: LISTING.map(({ preview_url: _, ...f }) => f) },
  })
  const el = document.createElement('div')
  document.body.appendChild(el)
  const pinia = createPinia()
  setActivePinia(pinia)
  const app = createApp({
    render: () => h(SummaryView as Component, { message: summary, conversationId: 'c1' }),
  })
  app.use(pinia)
  app.mount(el)
  unmounts.push(() => {
    app.unmount()
    el.remove()
  })
  for (let i = 0; i < 10 && !el.querySelector('[data-testid=file-live]'); i++) {
    await new Promise((r) => setTimeout(r, 0))
    await nextTick()
  }
  return el
}

describe('SummaryView', () => {
  it('offers an HTML page live, in a new tab without opener or referrer, and nothing else', async () => {
    const el = await mountSummary()
    const live = [...el.querySelectorAll<HTMLAnchorElement>('[data-testid=file-live]')]
    expect(live).toHaveLength(1)
    expect(live[0].href).toBe('http://tok.localhost:8002/site/index.html')
    expect(live[0].target).toBe('_blank')
    expect(live[0].rel).toBe('noopener noreferrer')
    expect(el.querySelectorAll('[data-testid=file]')).toHaveLength(2)
  })
})
