// The person's reply to a wait (ApprovalCard, QuestionCard), sent once: a 409 (answered
// meanwhile, in another tab or on the terminal) is a note and fetches the answer; any other
// failure is shown as the error. What the card shows of both: WaitFooter.vue.
import { reactive } from 'vue'
import { HttpError } from '../lib/api'
import type { Message } from '../lib/types'
import { useWaits } from '../stores/waits'

export function useWaitReply(props: { message: Message; conversationId: string }) {
  const waits = useWaits()
  /** what became of the last send, for the card's foot (WaitFooter's ``said``) */
  const said = reactive({ note: '', failure: '' })

  /** Send with ``send``; true once the server recorded it. */
  async function reply(send: () => Promise<unknown>): Promise<boolean> {
    said.failure = ''
    said.note = ''
    try {
      await send()
      return true
    } catch (e) {
      if (e instanceof HttpError && e.status === 409) {
        said.note = 'This was already answered.'
        void waits.refresh(props.conversationId || props.message.conversation_id)
      } else {
        said.failure = e instanceof Error ? e.message : String(e)
      }
      return false
    }
  }

  return { said, reply }
}
