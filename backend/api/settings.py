"""GET /api/settings (what the UI needs to know) and POST /api/llm/check (one tiny model
call, answered in plain words)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.agent.plan_parse import reply_words
from backend.api.common import manager, read_model
from backend.api.errors import ApiError
from backend.api.models import ModelCheck, ModelChoiceBody, ServerSettings
from backend.config import Settings
from backend.llm.base import LLMError
from backend.openapi import Reply, operation
from backend.waits.classes import APPROVAL_MODES

CHECK_TIMEOUT = 20.0
# a question whose answer can be checked, and that an echo of it cannot pass: the model
# answered sensibly only when its reply (its reasoning aside) holds 42
CHECK_MESSAGES = [
    {"role": "system", "content": "You are a model check. Answer with the number only."},
    {"role": "user", "content": "What is 17 plus 25? Reply with the number only."},
]
CHECK_ANSWER = re.compile(r"(?<![\d.])42(?![\d])|\bforty[- ]two\b", re.I)
SHOWN_ANSWER = 200  # characters of the model's answer in the check's reply
NO_MODEL = (
    "No model is configured. Put LLM_MODEL (a litellm model id such as openai/gpt-4o-mini) "
    "and LLM_API_KEY in the .env file next to where planact runs, then restart planact: "
    "settings are read once at start-up."
)


def _settings(request: Request) -> Settings:
    found: Settings = request.app.state.settings
    return found


def pick_model(settings: Settings, raw: Any) -> str | None:
    """The model a request asked for, validated against LLM_MODEL / LLM_MODELS (400 if it
    is not offered); None means the default."""
    if raw is None:
        return None
    choices = settings.model_choices()
    if not isinstance(raw, str) or raw not in choices:
        offered = ", ".join(choices) or "none (LLM_MODEL is not set)"
        raise ApiError(400, f"'model' must be one of the offered models: {offered}.")
    return raw


@operation(
    "What the UI needs to know",
    tag="settings",
    replies=(Reply(200, "Models, runtimes, limits and approval modes offered.", ServerSettings),),
)
async def get_settings(request: Request) -> Response:
    s = _settings(request)
    answer = ServerSettings(
        model=s.llm_model,
        models=s.model_choices(),
        runtime=s.runtime,  # what a run gets when it names none; the UI starts from it
        runtimes=request.app.state.runtimes_available,
        auth=s.auth_enabled,
        upload_max_mb=s.upload_max_mb,
        workspace_max_mb=s.workspace_max_mb,
        approval=s.approval_mode,
        approval_modes=list(APPROVAL_MODES),
    )
    return JSONResponse(answer.model_dump())


@operation(
    "Check the model",
    tag="settings",
    body=ModelChoiceBody,
    body_required=False,
    replies=(Reply(200, "One tiny model call: whether it worked, and why not.", ModelCheck),),
    errors=(413, 415),
)
async def check_model(request: Request) -> Response:
    body = await read_model(request, ModelChoiceBody, optional=True)
    s = _settings(request)
    model = pick_model(s, body.model) or s.llm_model
    if not model:
        unset = ModelCheck(ok=False, model=None, latency_ms=0, error=NO_MODEL)
        return JSONResponse(unset.model_dump())
    llm = manager(request).llm
    started = time.monotonic()
    error: str | None = None
    answer = ""
    try:
        completion = await asyncio.wait_for(
            llm.complete(stage="check", messages=[dict(m) for m in CHECK_MESSAGES], model=model),
            CHECK_TIMEOUT,
        )
        answer = reply_words(completion.text)
        if not answer and not completion.tool_calls:
            error = "The model answered with an empty reply."
        elif not CHECK_ANSWER.search(answer):
            error = (
                "The model answered, but not what it was asked (what 17 plus 25 is; it said: "
                f"{answer[:SHOWN_ANSWER]!r}): it may be too weak to follow planact's "
                "instructions, or the server may use the wrong chat template for it."
            )
    except TimeoutError:
        error = f"The model did not answer within {CHECK_TIMEOUT:g} seconds."
    except LLMError as exc:
        error = str(exc)
    except Exception as exc:  # a provider error litellm did not classify
        error = f"The call failed: {type(exc).__name__}: {exc}"
    latency = round((time.monotonic() - started) * 1000)
    checked = ModelCheck(
        ok=error is None,
        model=model,
        latency_ms=latency,
        error=error,
        answer=answer[:SHOWN_ANSWER] if answer else None,
    )
    return JSONResponse(checked.model_dump(exclude_none=True))


routes = [
    Route("/api/settings", get_settings, methods=["GET"]),
    Route("/api/llm/check", check_model, methods=["POST"]),
]
