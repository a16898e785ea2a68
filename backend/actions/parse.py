"""Model reply -> actions. Pure: no I/O; problems go into Action.warnings or FormatError.

Accepted dialects and the rules are listed in docs/dialects.md. In short: reasoning and
prose are stepped over, only known action tags (or explicit tool-call wrappers and JSON
tool calls) start an action, and parameter bodies are raw text whose end is found by
balancing close tags, so file content stays byte-exact.
"""

from __future__ import annotations

from typing import Any

from backend.actions import messages
from backend.actions.jsoncalls import RawAction, native_calls
from backend.actions.model import ACTIONS, Action, FormatError, TruncatedReplyError
from backend.actions.scanner import Scanner, canonical_param
from backend.actions.values import clean_plain, clean_raw

# params whose value may not be empty (after trimming)
_NON_EMPTY = ("path", "command")


def extract_thinking(text: str) -> list[str]:
    """The reasoning blocks' text, in order (`<think>`/`<thinking>`, a reply's text before
    a `</think>` that has no opener, and an unclosed block's text)."""
    return Scanner(text).run().thinking


def parse_actions(
    text: str,
    *,
    finish_reason: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> list[Action]:
    """The actions in a model reply, in order.

    `finish_reason` is the provider's (pass it: "length" marks a cut-off reply);
    `tool_calls` the OpenAI-style native list, which, when not empty, is used instead of
    the text. Raises FormatError (TruncatedReplyError when cut off) with a message for
    the model.
    """
    cut = finish_reason in ("length", "max_tokens")
    if tool_calls:
        calls = native_calls(tool_calls)
        if cut and calls and calls[-1].error is not None:
            # the arguments were cut off mid-JSON
            raise TruncatedReplyError(messages.truncated(calls[-1].name, "arguments", "", cut=True))
        return [_validate(raw, cut=False, last=False) for raw in calls]

    scan = Scanner(text).run()
    found = scan.actions
    chosen = [a for a in found if not a.fenced] or found
    for raw in chosen:
        if raw.truncated is not None:
            raise TruncatedReplyError(
                messages.truncated(raw.name, raw.truncated, _path_of(raw), cut=cut)
            )
    if not chosen:
        if scan.unclosed_reasoning:
            if cut:
                raise TruncatedReplyError(messages.unclosed_reasoning(cut=True))
            raise FormatError(messages.unclosed_reasoning(cut=False))
        if cut:
            raise TruncatedReplyError(messages.cut_before_action())
        raise FormatError(messages.no_action(list(dict.fromkeys(scan.mentions))))
    return [_validate(raw, cut=cut, last=i == len(chosen) - 1) for i, raw in enumerate(chosen)]


def _path_of(raw: RawAction) -> str:
    for name, value, _ in raw.params:
        if canonical_param(ACTIONS.get(raw.name), name) == "path":
            return value.strip()
    return ""


def _validate(raw: RawAction, *, cut: bool, last: bool) -> Action:
    if raw.error is not None:
        raise FormatError(raw.error)
    if not raw.known:
        raise FormatError(messages.unknown_action(raw.name))
    spec = ACTIONS[raw.name]
    allowed = (*spec.required, *spec.optional)
    params: dict[str, str] = {}
    warnings = list(raw.warnings)
    for written, value, needs_cleaning in raw.params:
        name = canonical_param(spec, written)
        if name not in allowed:
            warnings.append(
                f"unknown parameter `{written}` of `{spec.name}` was ignored "
                f"(it takes: {', '.join(allowed)})"
            )
            continue
        if name in params:
            raise FormatError(messages.duplicate_param(spec, name))
        if needs_cleaning:
            value = clean_raw(value) if name in spec.raw else clean_plain(value)
        params[name] = value
    missing = [p for p in spec.required if p not in params]
    if missing:
        if cut and last and not raw.closed:
            raise TruncatedReplyError(
                messages.truncated(spec.name, missing[0], params.get("path", ""), cut=True)
            )
        raise FormatError(messages.missing_params(spec, missing))
    for name in _NON_EMPTY:
        if name in params and not params[name].strip():
            raise FormatError(messages.empty_param(spec, name))
    if "cwd" in params and not params["cwd"].strip():
        del params["cwd"]
    return Action(spec.name, params, warnings)
