// @vitest-environment jsdom
// The file link (components/FileLink.vue) the cards and the summary share: a path as a button
// that opens the file in the preview pane.
import { afterEach, describe, expect, it } from 'vitest'
import { createApp, h, type Component } from 'vue'
import { createPinia, setActivePinia } from 'pinia'
import FileLink from '../src/components/FileLink.vue'
import { useApp } from '../src/stores/app'

const unmounts: (() => void)[] = []
afterEach(() => unmounts.splice(0).forEach((u) => u()))

function mount(props: Record<string, unknown>, attrs: Record<string, unknown> = {}) {
  const el = document.createElement('div')
  document.body.appendChild(el)
  const pinia = createPinia()
  const app = createApp({ render: () => h(FileLink as Component, { ...props, ...attrs }) })
  app.use(pinia)
  app.mount(el)
  setActivePinia(pinia)
  unmounts.push(() => {
    app.unmount()
    el.remove()
  })
  return { button: el.querySelector('button') as HTMLButtonElement, store: useApp() }
}

describe('FileLink', () => {
  it('shows the path and opens it in the preview, named by its last part', () => {
    const { button, store } = mount({ conversationId: 'c1', filepath: 'src/app.py' })
    expect(button.textContent?.trim()).toBe('src/app.py')
    expect(button.title).toBe('Preview src/app.py')
    expect(store.preview).toBeNull()
    button.click()
    expect(store.preview).toEqual({ conversationId: 'c1', filepath: 'src/app.py', filename: 'app.py' })
  })

  it('passes a given name and URL on, and the caller attributes to the button', () => {
    const { button, store } = mount(
      { conversationId: 'c2', filepath: 'out/report.pdf', filename: 'report (1).pdf', url: '/api/x' },
      { 'data-testid': 'file-preview', class: 'file-name' },
    )
    expect(button.dataset.testid).toBe('file-preview')
    expect(button.classList.contains('file-name')).toBe(true)
    expect(button.classList.contains('linkish')).toBe(true)
    button.click()
    expect(store.preview).toEqual({
      conversationId: 'c2',
      filepath: 'out/report.pdf',
      filename: 'report (1).pdf',
      url: '/api/x',
    })
  })
})
