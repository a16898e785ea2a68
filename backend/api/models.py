"""The API's wire models: the request bodies the routes validate with (``read_model``) and
the answers they give. The OpenAPI document (backend/openapi) is generated from them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message
from backend.store.shapes import (
    ConversationDetail,
    ConversationStatus,
    ConversationSummary,
    RunInfo,
    RunStatus,
    RunWait,
    UsageFigures,
    UsageSummary,
)
from backend.waits.replies import Answered, ApprovalDecision, Decision

__all__ = [
    "Answered",
    "ConversationDetail",
    "ConversationStatus",
    "ConversationSummary",
    "Decision",
    "RunInfo",
    "RunStatus",
    "RunWait",
    "UsageFigures",
    "UsageSummary",
]

# ids are uuid4 hex; the API answers 404 for anything that cannot be one (backend/api/common)
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# a message seq in a query parameter or header (seq_param in backend/api/common)
SEQ = {"type": "string", "pattern": r"^\s*[0-9]{1,18}\s*$"}
ApprovalMode = Literal["never", "risky", "always"]


class Body(BaseModel):
    """A JSON request body: types are checked strictly (``"1"`` is not a number); fields
    a route does not know are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore")


# -- request bodies -------------------------------------------------------------------------


class StartRunBody(Body):
    goal: str | None = Field(
        None,
        description="What to do; required (or `question`); over 100,000 characters is 413.",
        json_schema_extra={"minLength": 1, "pattern": r"\S"},
    )
    question: str | None = Field(None, description="An alias of `goal`.")
    conversation_id: str | None = Field(
        None,
        description="Continue this conversation; absent: a new one.",
        json_schema_extra={"pattern": ID_PATTERN},
    )
    mode: Literal["auto", "agent", "chat"] = "auto"
    runtime: str | None = Field(
        None, description="`local` or `docker`: one of `runtimes` in GET /api/settings."
    )
    model: str | None = Field(None, description="One of `models` in GET /api/settings.")
    mcp_servers: list[str] | None = Field(
        None, description="Names of configured MCP servers the run may use (absent: all)."
    )
    approval: ApprovalMode | None = Field(None, description="Absent: APPROVAL_MODE.")


class NewConversationBody(Body):
    title: str = Field("", description="At most 200 characters, no control characters.")


class RenameBody(Body):
    title: str = Field(
        description="A non-empty title: at most 200 characters, no control characters.",
        json_schema_extra={"pattern": r"\S", "maxLength": 200},
    )


class ModelChoiceBody(Body):
    model: str | None = Field(None, description="One of `models` in GET /api/settings.")


class ApprovalBody(Body):
    decision: ApprovalDecision
    reason: str | None = Field(None, description="Told to the model with a rejection.")
    digest: str | None = Field(
        None,
        description="The digest of the action the person was shown (the approval's "
        "meta.json[0].digest); another digest is 409 and changes nothing.",
    )


class AnswerBody(Body):
    answer: str


# -- answers --------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str = Field(description="invalid_request, unauthorized, forbidden, not_found, …")
    message: str = Field(description="What went wrong, in plain words.")


class ErrorBody(BaseModel):
    """Every JSON error."""

    error: ErrorDetail


class Health(BaseModel):
    status: Literal["ok"]
    runtimes: list[str]


class ReadyCheck(BaseModel):
    ok: bool
    detail: str = Field(description="What was found, in plain words.")


class Readiness(BaseModel):
    status: Literal["ready", "unready"]
    checks: dict[str, ReadyCheck] = Field(description="database, migrations, runtime")
    reasons: list[str] = Field(description="Why it is not ready (empty when ready).")
    error: ErrorDetail | None = Field(None, description="When not ready: the reasons, too.")


class RunStarted(BaseModel):
    conversation_id: str
    run_id: str


class RunStopping(BaseModel):
    run_id: str
    status: str = Field(description="`stopping`, or the run's status when it had ended.")


class FileEntry(BaseModel):
    filepath: str = Field(description="Relative to the conversation's workspace.")
    filename: str
    url: str = Field(description="Its download URL (GET /api/files/…).")
    filesize: int
    preview_url: str | None = Field(
        None, description="HTML pages: where the page opens with its scripts running (previews)."
    )


class ConversationCreated(BaseModel):
    conversation_id: str
    title: str


class Deleted(BaseModel):
    deleted: str = Field(description="The id of the deleted conversation.")


class ServerSettings(BaseModel):
    model: str | None
    models: list[str]
    runtime: str = Field(
        description="The runtime a run gets when it names none; the UI starts from it."
    )
    runtimes: list[str] = Field(description="The runtimes a run may pick on this server.")
    auth: bool
    upload_max_mb: float
    workspace_max_mb: float
    approval: str
    approval_modes: list[str]


class ModelCheck(BaseModel):
    ok: bool
    model: str | None
    latency_ms: int
    error: str | None = Field(None, description="Present when `ok` is false.")
    answer: str | None = Field(
        None,
        description="What the model answered (reasoning aside, at most 200 characters): "
        "the check asks what 17 plus 25 is, and `ok` means it said 42.",
    )


class McpTool(BaseModel):
    name: str
    description: str


class McpServerState(BaseModel):
    name: str
    state: Literal["ready", "starting", "failed"]
    tools: list[McpTool]
    error: str | None = None
    stderr: list[str] | None = None


# -- the stream's events --------------------------------------------------------------------


class EndEvent(BaseModel):
    """The last event of a run's stream."""

    conversation_id: str
    run_id: str
    status: Literal["completed", "failed", "stopped"]


STREAM_EVENTS: dict[str, type[BaseModel]] = {
    "message": Message,
    "delta": DeltaEvent,
    "end": EndEvent,
}
