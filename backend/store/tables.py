"""Database tables (SQLAlchemy 2). Schema changes go through Alembic migrations."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(64), index=True)
    title: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(16), default="idle")
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    # a rewind is putting the workspace's files back (no run starts, no other rewind) until
    # then: a lease, so that a rewinder that died frees the conversation
    restoring_until: Mapped[datetime | None] = mapped_column(default=None)


# at most one running run per conversation, across processes (PostgreSQL and SQLite)
ONE_RUNNING = "status = 'running'"


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index(
            "uq_runs_one_running",
            "conversation_id",
            unique=True,
            sqlite_where=text(ONE_RUNNING),
            postgresql_where=text(ONE_RUNNING),
        ),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    goal: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(16), default="auto")
    runtime: Mapped[str] = mapped_column(String(16), default="local")
    status: Mapped[str] = mapped_column(String(16), default="running")
    error: Mapped[str] = mapped_column(Text, default="")
    task_type: Mapped[str] = mapped_column(String(64), default="")
    # the model a person picked for this run ("": LLM_MODEL and the specialists)
    model: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(default=None)
    # the instance executing it (None: queued, no worker took it yet); see Instance
    owner: Mapped[str | None] = mapped_column(String(64), default=None, index=True)
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # the run's RunState at its last step (JSON; None: no step taken yet), see agent/state.py
    checkpoint: Mapped[str | None] = mapped_column(Text, default=None)
    # the workspace's files when it began (JSON: path -> [size, mtime_ns]), stored once
    start_files: Mapped[str | None] = mapped_column(Text, default=None)
    # the current task's finished turns (JSON), stored before each model call
    transcript: Mapped[str | None] = mapped_column(Text, default=None)
    resumes: Mapped[int] = mapped_column(Integer, default=0)  # times another process took it
    repeated_calls: Mapped[int] = mapped_column(Integer, default=0)  # model calls made again
    # the MCP servers the person picked (JSON list; None: every configured server)
    mcp_servers: Mapped[str | None] = mapped_column(Text, default=None)
    # runs that wait for a person (backend/waits): the approval mode, whether ask_user is
    # offered, and the wait it is parked on (uuid of its message, kind "approval" |
    # "ask_user", deadline); the answer that ended the wait (JSON), read when it resumes
    approval: Mapped[str] = mapped_column(String(16), default="never")
    can_ask: Mapped[bool] = mapped_column(Boolean, default=True)
    wait_uuid: Mapped[str | None] = mapped_column(String(64), default=None)
    wait_kind: Mapped[str | None] = mapped_column(String(16), default=None)
    wait_until: Mapped[datetime | None] = mapped_column(default=None)
    wait_answer: Mapped[str | None] = mapped_column(Text, default=None)
    # the run's trace (OpenTelemetry, backend/observe): "<trace id>-<root span id>" in hex,
    # so a run resumed by another process continues the same trace
    trace_context: Mapped[str | None] = mapped_column(String(64), default=None)


class Instance(Base):
    """A server or worker process. Its lease (``expires_at``) is renewed every few seconds;
    the runs it owns are failed by recovery only once the lease has expired."""

    __tablename__ = "instances"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(200), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(default=utcnow)


class MessageRow(Base):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("conversation_id", "seq", name="uq_messages_conversation_seq"),
        Index("ix_messages_run_seq", "run_id", "seq"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer)
    uuid: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    action_type: Mapped[str] = mapped_column(String(32))
    content: Mapped[str] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON)
    timestamp: Mapped[int] = mapped_column(BigInteger)
    # out of the history (backend/checkpoints): 0 in it, 1 rewound away (a rewind to a
    # later checkpoint brings it back), 2 dropped (a new run began after the rewind)
    hidden: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class Task(Base):
    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    conversation_id: Mapped[str] = mapped_column(String(64), index=True)
    position: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    requirement: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="pending")
    result: Mapped[str] = mapped_column(Text, default="")


class FileRow(Base):
    __tablename__ = "files"
    __table_args__ = (UniqueConstraint("conversation_id", "filepath", name="uq_files_path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    run_id: Mapped[str] = mapped_column(String(64))
    filepath: Mapped[str] = mapped_column(Text)
    filesize: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Usage(Base):
    __tablename__ = "usage"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    run_id: Mapped[str] = mapped_column(String(64), index=True)
    stage: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # of prompt_tokens: read from the provider's prompt cache, written to it
    cached_input_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# previews: the services the agent started and the workspace's static pages (backend/previews)
class PreviewRow(Base):
    """A preview of a conversation: a service (``kind`` "service", hosted by the process
    ``owner``) or its workspace's static pages (``kind`` "files"). ``token`` is the only
    credential its URL carries."""

    __tablename__ = "previews"
    __table_args__ = (UniqueConstraint("conversation_id", "kind", "name"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16), default="service")
    name: Mapped[str] = mapped_column(String(64), default="")
    port: Mapped[int] = mapped_column(Integer, default=0)
    path: Mapped[str] = mapped_column(Text, default="/")
    command: Mapped[str] = mapped_column(Text, default="")
    runtime: Mapped[str] = mapped_column(String(32), default="")
    state: Mapped[str] = mapped_column(String(16), default="starting")
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    socket: Mapped[str] = mapped_column(Text, default="")
    token: Mapped[str] = mapped_column(String(64), unique=True)
    token_expires: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_request_at: Mapped[datetime] = mapped_column(default=utcnow)
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    log: Mapped[list[str]] = mapped_column(JSON, default=list)


# checkpoints of a conversation's workspace (backend/checkpoints): the index of its shadow
# git repository under CHECKPOINT_DIR, one row per checkpoint, by the seq it follows
class CheckpointRow(Base):
    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("conversation_id", "seq", name="uq_checkpoints_seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    seq: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str] = mapped_column(String(64), default="")
    label: Mapped[str] = mapped_column(String(200), default="")
    files_changed: Mapped[int] = mapped_column(Integer, default=0)
    commit: Mapped[str] = mapped_column(String(64))
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ShareRow(Base):
    """A read-only link to a conversation as it was when shared: its messages up to
    ``seq`` and the workspace's snapshot ``commit``. ``token`` is the link's only key."""

    __tablename__ = "shares"

    token: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer)
    commit: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(200), default="")
    # the seqs of the messages in the history then (JSON list): later rewinds change nothing
    seqs: Mapped[str] = mapped_column(Text, default="[]")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
