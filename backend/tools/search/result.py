"""What a tool gives back: words for the model, data for the stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolResult:
    status: str  # "success" | "failure"
    content: str  # plain words for the model (and the person)
    data: dict[str, Any] = field(default_factory=dict)  # structured, for the stream and the UI

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @classmethod
    def failure(cls, content: str, **data: Any) -> ToolResult:
        return cls("failure", content, dict(data))
