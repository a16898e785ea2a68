"""The one Message model, in the shape the Vue client expects. Stages build through here."""

from __future__ import annotations

import json
import time
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from backend.messages.payloads import JsonObject, MetaItem, plain_items

Role = Literal["user", "assistant"]
Status = Literal["success", "failure", "running"]


class Meta(BaseModel):
    pid: str = ""
    task_id: str | None = None
    action_type: str = Field(
        "",
        description="A MessageKind; readers pass over kinds they do not know (a newer writer).",
    )
    filepath: str = ""
    url: str = ""
    json_: list[MetaItem] = Field(
        default_factory=list,
        alias="json",
        description="What the kind carries (MetaPayloads): its items, each a payload model's "
        "JSON; an unknown kind's items are passed over.",
    )
    content: str = ""
    is_active: bool = True

    model_config = {"populate_by_name": True, "json_schema_serialization_defaults_required": True}


class Message(BaseModel):
    role: Role = "assistant"
    uuid: str = Field(default_factory=lambda: uuidlib.uuid4().hex)
    status: Status = "success"
    content: str = ""
    comments: str = ""
    memorized: str = ""
    timestamp: int = Field(default_factory=lambda: int(time.time() * 1000))
    type: str = ""
    conversation_id: str = ""
    run_id: str = ""
    seq: int = Field(
        0, description="Strictly increasing within a conversation; 0 before it is stored."
    )
    meta: Meta = Field(default_factory=Meta)

    model_config = {"json_schema_serialization_defaults_required": True}

    @classmethod
    def build(
        cls,
        action_type: str,
        content: str = "",
        *,
        role: Role = "assistant",
        status: Status = "success",
        task_id: str | None = None,
        filepath: str = "",
        url: str = "",
        json: Sequence[BaseModel | JsonObject] = (),
        uuid: str | None = None,
        meta_content: str = "",
    ) -> Message:
        meta = Meta(
            action_type=action_type,
            task_id=task_id,
            filepath=filepath,
            url=url,
            json=plain_items(json),
            content=meta_content,
        )
        msg = cls(role=role, status=status, content=content, meta=meta)
        if uuid:
            msg.uuid = uuid
        return msg

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls.model_validate(data)
