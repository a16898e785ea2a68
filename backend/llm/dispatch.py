"""The LLM the app uses: each call goes to the lean OpenAI-compatible path when the model
allows it (backend/llm/providers.py), to litellm otherwise."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from typing import Any, Literal, Unpack

from backend.llm.base import (
    Completion,
    DeltaCallback,
    LLMConfigError,
    LLMDeadlineError,
    LLMTimeoutError,
)
from backend.llm.litellm_client import LiteLLM, import_litellm
from backend.llm.openai_compat import OpenAICompatLLM
from backend.llm.options import ClientOptions, ModelClient
from backend.observe.calls import ModelCall
from backend.observe.labels import ModelLabels

log = logging.getLogger(__name__)


class DispatchLLM(ModelClient):
    def __init__(
        self,
        model: str | None,
        *,
        client: Literal["auto", "litellm"] = "auto",
        known_models: Iterable[str | None] = (),
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(model, **options)
        self.mode = client
        self.lean = OpenAICompatLLM(model, **options)
        self.litellm = LiteLLM(model, **options)
        # the model label of the metrics: the configured models by name, others "other"
        self.labels = ModelLabels([model, *known_models])

    def path(self, model: str | None = None) -> Literal["lean", "litellm"]:
        """Which client serves ``model`` (default: the configured model)."""
        use = model or self.model
        if self.mode == "auto" and use and self.lean.endpoint(use) is not None:
            return "lean"
        return "litellm"

    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        use = self.model_for(model)
        client = self.lean if self.path(use) == "lean" else self.litellm
        call = ModelCall(self.labels, stage, use, messages)  # metrics, and a span if traced
        try:
            got = await client.complete(
                stage=stage, messages=messages, model=use, on_delta=call.deltas(on_delta)
            )
        except BaseException as exc:
            call.failed(_outcome(exc), exc)
            raise
        call.done(
            model=got.model or use,
            input_tokens=got.prompt_tokens,
            output_tokens=got.completion_tokens,
            cached_input_tokens=got.cached_input_tokens,
            cache_write_tokens=got.cache_write_tokens,
            cost=got.cost,
            cache_cost=got.cache_cost,
            finish_reason=got.finish_reason,
            text=got.text,
        )
        return got

    def prewarm(self) -> threading.Thread | None:
        """Import litellm in a background thread when the default model needs it, so that
        the first run does not wait for the import (seconds). Returns the thread (None when
        litellm is not needed); call it at start-up, before requests arrive."""
        if not self.model or self.path() != "litellm":
            return None
        thread = threading.Thread(target=_import_litellm, name="litellm-import", daemon=True)
        thread.start()
        return thread

    async def aclose(self) -> None:
        await self.lean.aclose()
        await self.litellm.aclose()


def _outcome(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, LLMTimeoutError | LLMDeadlineError):
        return "timeout"
    if isinstance(exc, LLMConfigError):
        return "config_error"
    return "error"


def _import_litellm() -> None:
    try:
        import_litellm()
    except Exception:  # reported on first use
        log.debug("litellm prewarm failed", exc_info=True)
