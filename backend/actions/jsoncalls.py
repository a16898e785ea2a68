"""JSON tool calls: `{"name", "arguments"|"parameters"}` in text, and native `tool_calls`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backend.actions import corrections

if TYPE_CHECKING:
    from backend.actions.vocabulary import Vocabulary

NAME_KEYS = ("name", "tool", "tool_name", "action")
ARG_KEYS = ("arguments", "parameters", "args", "input", "params", "action_input")

_DECODER = json.JSONDecoder(strict=False)  # models put raw newlines inside strings


@dataclass
class RawAction:
    """An action as found, before validation."""

    name: str  # canonical when known, else as written
    known: bool
    # (param as written, value, value still needs XML cleaning)
    params: list[tuple[str, str, bool]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fenced: bool = False
    closed: bool = False
    truncated: str | None = None  # the raw param left open at the end of the reply
    error: str | None = None  # a model-facing message (e.g. unreadable arguments)
    # params index -> the indentation of the line its opener starts (pretty-printed XML)
    indents: dict[int, str] = field(default_factory=dict)
    start: int = -1  # where the action starts and ends in the reply (when known)
    end: int = -1


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value)


def from_mapping(vocab: Vocabulary, name: str, args: Any) -> RawAction:
    canon = vocab.canonical(name)
    action = RawAction(name=canon or name, known=canon is not None, closed=True)
    if isinstance(args, str):
        if not args.strip():
            args = {}
        else:
            try:
                args = _DECODER.decode(args)
            except json.JSONDecodeError as exc:
                action.error = corrections.bad_arguments(vocab, name, f"invalid JSON: {exc.msg}")
                return action
    if args is None:
        args = {}
    if not isinstance(args, dict):
        action.error = corrections.bad_arguments(vocab, name, "not a JSON object")
        return action
    for key, value in args.items():
        if value is None:  # `"cwd": null` means: not given
            continue
        action.params.append((str(key), _to_text(value), False))
    return action


def calls_in(vocab: Vocabulary, obj: Any, depth: int = 0) -> list[RawAction] | None:
    """The tool calls in a decoded JSON value, or None when it is not a tool call.
    Nesting is bounded (a list of calls, a `tool_calls` key, a `function` object)."""
    if depth > 4:
        return None
    if isinstance(obj, list):
        if not obj:
            return None
        found: list[RawAction] = []
        for item in obj:
            calls = calls_in(vocab, item, depth + 1)
            if calls is None:
                return None
            found.extend(calls)
        return found
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("tool_calls"), list):
        return calls_in(vocab, obj["tool_calls"], depth + 1)
    if isinstance(obj.get("function"), dict) and "name" in obj["function"]:
        return calls_in(vocab, obj["function"], depth + 1)
    name = next((obj[k] for k in NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None:
        return None
    arg_key = next((k for k in ARG_KEYS if k in obj), None)
    if arg_key is not None:
        return [from_mapping(vocab, name, obj[arg_key])]
    # flat form {"action": "write_code", "path": …}: only for our own action names
    if vocab.canonical(name) is None:
        return None
    name_key = next(k for k in NAME_KEYS if obj.get(k) == name)
    return [from_mapping(vocab, name, {k: v for k, v in obj.items() if k != name_key})]


def decode_at(text: str, pos: int) -> tuple[Any, int] | None:
    try:
        return _DECODER.raw_decode(text, pos)
    except (json.JSONDecodeError, RecursionError):  # nested too deeply: not a tool call
        return None


def native_calls(vocab: Vocabulary, tool_calls: list[dict[str, Any]]) -> list[RawAction]:
    actions: list[RawAction] = []
    for call in tool_calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            fn = call if isinstance(call, dict) else {}
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            action = RawAction(name="?", known=True)
            action.error = corrections.bad_arguments(
                vocab, "?", "the tool call has no function name"
            )
            actions.append(action)
            continue
        actions.append(from_mapping(vocab, name, fn.get("arguments")))
    return actions
