"""Conversations and the files of their workspace (titles, uploads, files a run wrote)."""

from __future__ import annotations

import json
from typing import cast

from sqlalchemy import Connection, Table, delete, func, insert, select, update
from sqlalchemy.orm import Session

from backend.store.base import (
    CONTROL_CHANNEL,
    CONVERSATIONS,
    FILES,
    UPLOAD_RUN,
    StoreBase,
    iso,
    new_id,
)
from backend.store.runs import run_row
from backend.store.shapes import (
    ConversationDetail,
    ConversationStatus,
    ConversationSummary,
    RunInfo,
)
from backend.store.tables import Conversation, FileRow, MessageRow, Run, Task, Usage, utcnow
from backend.store.usage import figures, run_usages, usage_summary


class SqlConversations(StoreBase):
    """Conversations, their titles and the files of their workspace."""

    # -- conversations --------------------------------------------------------------------
    async def create_conversation(self, user_id: str, title: str) -> str:
        cid = new_id()

        def fn(c: Connection) -> str:
            now = utcnow()
            c.execute(
                insert(CONVERSATIONS).values(
                    id=cid,
                    user_id=user_id,
                    title=title[:200],
                    status="idle",
                    last_seq=0,
                    created_at=now,
                    updated_at=now,
                )
            )
            return cid

        return await self._quick(fn)

    async def get_conversation(self, user_id: str, cid: str) -> ConversationDetail | None:
        def fn(s: Session) -> ConversationDetail | None:
            conv = s.get(Conversation, cid)
            if conv is None or conv.user_id != user_id:
                return None
            runs = s.scalars(
                select(Run).where(Run.conversation_id == cid).order_by(Run.created_at)
            ).all()
            spent = run_usages(s, cid)
            none = figures(0, 0, 0, 0, 0, None)
            usage = usage_summary(s, Usage.conversation_id == cid)
            total = usage.total
            return ConversationDetail(
                **_conversation(conv).model_dump(),
                # each run's own tokens, beside the conversation's
                runs=[
                    run_row(
                        r,
                        RunInfo,
                        total_tokens=spent.get(r.id, none).total_tokens,
                        usage=spent.get(r.id, none),
                    )
                    for r in runs
                ],
                usage=usage,
                prompt_tokens=total.prompt_tokens,
                completion_tokens=total.completion_tokens,
                total_tokens=total.total_tokens,
                cost=total.cost,
                input_tokens=total.input_tokens,
                cached_input_tokens=total.cached_input_tokens,
                cache_write_tokens=total.cache_write_tokens,
                output_tokens=total.output_tokens,
                cost_usd=total.cost_usd,
            )

        return await self._run(fn)

    async def list_conversations(self, user_id: str, q: str = "") -> list[ConversationSummary]:
        """Newest first; ``q`` keeps those whose title or one of whose goals contains it
        (case-insensitive, taken literally)."""

        def fn(s: Session) -> list[ConversationSummary]:
            query = select(Conversation).where(Conversation.user_id == user_id)
            if q.strip():
                pattern = "%" + _escape_like(q.strip().lower()) + "%"
                in_goal = (
                    select(Run.id)
                    .where(
                        Run.conversation_id == Conversation.id,
                        func.lower(Run.goal).like(pattern, escape="\\"),
                    )
                    .exists()
                )
                query = query.where(
                    func.lower(Conversation.title).like(pattern, escape="\\") | in_goal
                )
            rows = s.scalars(
                query.order_by(Conversation.updated_at.desc(), Conversation.created_at.desc())
            ).all()
            return [_conversation(c) for c in rows]

        return await self._run(fn)

    async def delete_conversation(self, user_id: str, cid: str, origin: str = "") -> bool:
        """Delete the conversation and all it holds; announce it to every process (``origin``:
        the instance id of the one deleting, which has dropped its sandboxes already)."""

        def fn(s: Session) -> bool:
            conv = s.get(Conversation, cid)
            if conv is None or conv.user_id != user_id:
                return False
            for model in (MessageRow, FileRow, Usage, Task):
                s.execute(delete(model).where(model.conversation_id == cid))
            s.execute(delete(Run).where(Run.conversation_id == cid))
            s.delete(conv)
            # every process drops what it holds for the workspace (a worker's sandbox)
            self._notify(s, CONTROL_CHANNEL, "forget:" + json.dumps([user_id, cid, origin]))
            return True

        return await self._run(fn)

    # -- titles and uploads ---------------------------------------------------------------
    async def rename_conversation(self, user_id: str, cid: str, title: str) -> bool:
        def fn(c: Connection) -> bool:
            done = c.execute(
                update(CONVERSATIONS)
                .where(CONVERSATIONS.c.id == cid, CONVERSATIONS.c.user_id == user_id)
                .values(title=title[:200])
            )
            return bool(done.rowcount)

        return await self._core(fn)

    async def record_uploads(self, cid: str, files: list[tuple[str, int]]) -> None:
        """Files a person uploaded: file rows with run id ``upload`` (a run that changes one
        later takes the row over)."""
        await self.record_files(cid, UPLOAD_RUN, files)

    async def uploaded_files(self, cid: str) -> list[str]:
        def fn(c: Connection) -> list[str]:
            f = FILES.c
            rows = c.execute(
                select(f.filepath)
                .where(f.conversation_id == cid, f.run_id == UPLOAD_RUN)
                .order_by(f.filepath)
            ).all()
            return [r[0] for r in rows]

        return await self._core(fn)

    async def run_files(self, run_id: str) -> list[tuple[str, int]]:
        def fn(c: Connection) -> list[tuple[str, int]]:
            f = cast(Table, FileRow.__table__).c
            rows = c.execute(
                select(f.filepath, f.filesize).where(f.run_id == run_id).order_by(f.filepath)
            ).all()
            return [(r[0], int(r[1])) for r in rows]

        return await self._core(fn)

    async def record_files(self, cid: str, run_id: str, files: list[tuple[str, int]]) -> None:
        def fn(s: Session) -> None:
            for path, size in files:
                row = s.scalar(
                    select(FileRow).where(FileRow.conversation_id == cid, FileRow.filepath == path)
                )
                if row is None:
                    s.add(FileRow(conversation_id=cid, run_id=run_id, filepath=path, filesize=size))
                else:
                    row.run_id, row.filesize, row.updated_at = run_id, size, utcnow()

        await self._run(fn)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conversation(c: Conversation) -> ConversationSummary:
    return ConversationSummary(
        conversation_id=c.id,
        title=c.title,
        status=cast(ConversationStatus, c.status),
        created_at=iso(c.created_at),
        updated_at=iso(c.updated_at),
    )
