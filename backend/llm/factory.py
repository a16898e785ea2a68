"""The model client of a process (serve, worker, run), made from its settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.llm.dispatch import DispatchLLM

if TYPE_CHECKING:
    from backend.config import Settings


def make_llm(settings: Settings) -> DispatchLLM:
    return DispatchLLM(
        settings.llm_model,
        api_key=settings.llm_api_key,
        base_url=settings.llm_base_url,
        client=settings.llm_client,
        timeout=settings.llm_timeout,
        call_max_seconds=settings.llm_call_max_seconds,
        max_retries=settings.llm_max_retries,
        retry_base_delay=settings.llm_retry_base_delay,
        stream=settings.llm_stream,
        max_output_tokens=settings.llm_max_output_tokens,
        known_models=settings.model_choices(),  # the bounded model label of the metrics
    )
