"""The API's answers as JSON Schema: the source of the web UI's TypeScript types for them.

    python -m backend.api.wire_types > frontend/src/lib/api.schema.json

The same pipeline as the message model's (backend/messages/schema.py): ``make frontend``
regenerates the schema when a model changes and turns it into
``frontend/src/lib/api.gen.ts`` (``make frontend-types``, json-schema-to-typescript);
both files are committed and ``tests/api/test_wire_types.py`` fails when they differ from
what the models give. The models are the ones the routes answer with and the OpenAPI
document names (backend/api/models.py, backend/store/shapes.py, previews): one per shape.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from backend.api.models import (
    Answered,
    ConversationCreated,
    ConversationDetail,
    ConversationSummary,
    Decision,
    Deleted,
    EndEvent,
    ErrorBody,
    FileEntry,
    Health,
    McpServerState,
    ModelCheck,
    RunStarted,
    RunStopping,
    ServerSettings,
)
from backend.api.previews import PreviewOut
from backend.messages.deltas import DeltaEvent
from backend.messages.schema import _name_enums_drop_titles, dumps
from backend.messages.tasks import PlanTask
from backend.tools.mcp.parts import McpCall

# what the web UI reads; their nested models (runs, usage, tools…) come with them
ANSWERS: tuple[type[BaseModel], ...] = (
    Health,
    ServerSettings,
    ModelCheck,
    ConversationSummary,
    ConversationDetail,
    ConversationCreated,
    Deleted,
    FileEntry,
    RunStarted,
    RunStopping,
    EndEvent,
    DeltaEvent,
    PreviewOut,
    McpServerState,
    ErrorBody,
    Decision,  # the answers to a waiting run (backend/waits/replies.py)
    Answered,
)
# what messages carry in meta.json (docs/api.md "Tools")
PAYLOADS: tuple[type[BaseModel], ...] = (PlanTask, McpCall)


def api_schema() -> dict[str, Any]:
    """One document: every answer and payload under ``$defs``, the root a union of them."""
    models = (*ANSWERS, *PAYLOADS)
    refs, top = models_json_schema(
        [(model, "serialization") for model in models], ref_template="#/$defs/{model}"
    )
    defs: dict[str, Any] = top["$defs"]
    for model in defs.values():
        _name_enums_drop_titles(model)
    return {
        "title": "WireShape",
        "description": "An answer of the API or a message's meta.json (docs/api.md): the "
        "web UI reads these.",
        "anyOf": [refs[(model, "serialization")] for model in models],
        "$defs": defs,
    }


def main() -> None:
    sys.stdout.write(dumps(api_schema()))


if __name__ == "__main__":
    main()
