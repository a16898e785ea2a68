"""Previews in the store (backend/previews): one row per service or static-pages preview of
a conversation, so that any process lists them, finds a token's target, and sees a dead
owner's services as stopped."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Row, Table, and_, delete, select, update

from backend.store.base import INSTANCES, StoreBase, new_id
from backend.store.rows import StoredPreview
from backend.store.tables import PreviewRow, utcnow

PREVIEWS = cast(Table, PreviewRow.__table__)
LIVE = ("starting", "ready")
OWNER_GONE = (
    "Stopped: the process that ran it ended (the server restarted, or it died); restart "
    "brings it back."
)


def _row(r: Row[Any]) -> StoredPreview:
    return StoredPreview(**r._mapping)


class SqlPreviews(StoreBase):
    async def put_preview(self, values: dict[str, Any]) -> StoredPreview:
        """Insert or replace the preview (conversation, kind, name); returns its row."""

        def fn(c: Connection) -> StoredPreview:
            key = and_(
                PREVIEWS.c.conversation_id == values["conversation_id"],
                PREVIEWS.c.kind == values.get("kind", "service"),
                PREVIEWS.c.name == values.get("name", ""),
            )
            old = c.execute(select(PREVIEWS.c.id).where(key)).scalar_one_or_none()
            if old is None:
                c.execute(PREVIEWS.insert().values(id=new_id(), **values))
            else:
                c.execute(update(PREVIEWS).where(PREVIEWS.c.id == old).values(**values))
            return _row(c.execute(select(PREVIEWS).where(key)).one())

        return await self._core(fn)

    async def update_preview(self, preview_id: str, **values: Any) -> None:
        def fn(c: Connection) -> None:
            c.execute(update(PREVIEWS).where(PREVIEWS.c.id == preview_id).values(**values))

        await self._core(fn)

    async def previews_of(self, conversation_id: str, kind: str = "service") -> list[StoredPreview]:
        """The conversation's previews; a live one whose owner's lease expired is stopped."""

        def fn(c: Connection) -> list[StoredPreview]:
            live = {
                r[0]
                for r in c.execute(select(INSTANCES.c.id).where(INSTANCES.c.expires_at > utcnow()))
            }
            rows = c.execute(
                select(PREVIEWS)
                .where(PREVIEWS.c.conversation_id == conversation_id, PREVIEWS.c.kind == kind)
                .order_by(PREVIEWS.c.started_at)
            ).all()
            out = []
            for r in rows:
                row = _row(r)
                if kind == "service" and row.state in LIVE and row.owner not in live:
                    row = replace(row, state="stopped", log=[*(row.log or []), OWNER_GONE])
                out.append(row)
            return out

        return await self._core(fn)

    async def live_previews_of_user(self, user_id: str) -> list[StoredPreview]:
        """The user's live services across their conversations (a dead owner's are not)."""

        def fn(c: Connection) -> list[StoredPreview]:
            live = {
                r[0]
                for r in c.execute(select(INSTANCES.c.id).where(INSTANCES.c.expires_at > utcnow()))
            }
            rows = c.execute(
                select(PREVIEWS).where(
                    PREVIEWS.c.user_id == user_id,
                    PREVIEWS.c.kind == "service",
                    PREVIEWS.c.state.in_(LIVE),
                )
            ).all()
            return [row for row in map(_row, rows) if row.owner in live]

        return await self._core(fn)

    async def preview_by_token(self, token: str) -> StoredPreview | None:
        """The preview ``token`` names, read as the listing reads it: a live service whose
        owner's lease expired (the process died or froze) is stopped."""

        def fn(c: Connection) -> StoredPreview | None:
            r = c.execute(select(PREVIEWS).where(PREVIEWS.c.token == token)).one_or_none()
            if r is None:
                return None
            row = _row(r)
            if row.kind == "service" and row.state in LIVE and row.owner is not None:
                alive = c.execute(
                    select(INSTANCES.c.id).where(
                        INSTANCES.c.id == row.owner, INSTANCES.c.expires_at > utcnow()
                    )
                ).scalar_one_or_none()
                if alive is None:
                    row = replace(row, state="stopped")
            return row

        return await self._core(fn)

    async def touch_preview(self, preview_id: str, when: datetime) -> None:
        await self.update_preview(preview_id, last_request_at=when)

    async def delete_preview(self, preview_id: str) -> None:
        def fn(c: Connection) -> None:
            c.execute(delete(PREVIEWS).where(PREVIEWS.c.id == preview_id))

        await self._core(fn)

    async def previews_owned(self, owner: str) -> list[StoredPreview]:
        """The live services ``owner`` hosts (its watcher's view: stop requests, requests)."""

        def fn(c: Connection) -> list[StoredPreview]:
            rows = c.execute(select(PREVIEWS).where(PREVIEWS.c.owner == owner)).all()
            return [_row(r) for r in rows]

        return await self._core(fn)
