"""Model reply -> actions. Pure: no I/O; problems go into Action.warnings or FormatError.

Accepted dialects and the rules are listed in docs/dialects.md. In short: reasoning and
prose are stepped over, only known action tags (or explicit tool-call wrappers and JSON
tool calls) start an action, and parameter bodies are raw text whose end is found by
balancing close tags, so file content stays byte-exact.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from backend.actions import corrections
from backend.actions.jsoncalls import RawAction, native_calls
from backend.actions.model import (
    MAX_REPLY_CHARS,
    Action,
    FormatError,
    TruncatedReplyError,
)
from backend.actions.note_examples import without_note_examples
from backend.actions.scanner import Scanner, canonical_param
from backend.actions.values import (
    clean_plain,
    clean_raw,
    join_surrogates,
    strip_wrapping_fence,
    trim_path,
)

if TYPE_CHECKING:
    from backend.actions.vocabulary import Vocabulary

log = logging.getLogger(__name__)

# params whose value may not be empty (after trimming)
_NON_EMPTY = ("path", "command", "old_str")
_PATHS = ("path", "cwd")


def _builtin() -> Vocabulary:
    from backend.actions.registry import builtin_registry

    return builtin_registry().vocabulary


def extract_thinking(text: str, vocab: Vocabulary | None = None) -> list[str]:
    """The reasoning blocks' text, in order (`<think>` and the other reasoning markers of
    docs/dialects.md, harmony `analysis` messages, a reply's text before a `</think>` that
    has no opener, and an unclosed block's text)."""
    if len(text) > MAX_REPLY_CHARS:
        return []
    try:
        return Scanner(text, vocab or _builtin()).run().thinking
    except RecursionError:
        return []


def parse_actions(
    text: str,
    *,
    finish_reason: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    vocab: Vocabulary | None = None,
) -> list[Action]:
    """The actions in a model reply, in order.

    ``vocab``: the actions it may hold (a registry's :attr:`vocabulary`; None: the builtin
    registry's).
    `finish_reason` is the provider's (pass it: "length" marks a reply the output limit
    cut, which is truncated: nothing in it runs, complete actions included);
    `tool_calls` the OpenAI-style native list, which, when not empty, is used instead of
    the text. Raises FormatError (TruncatedReplyError when cut off) with a message for
    the model; never anything else, whatever the input (linear time, no recursion limit,
    a size cap of MAX_REPLY_CHARS).
    """
    vocab = vocab or _builtin()
    size = len(text) + sum(len(str(c)) for c in tool_calls or ())
    if size > MAX_REPLY_CHARS:
        raise FormatError(
            corrections.too_large(size, MAX_REPLY_CHARS),
            user=f"a reply was too large ({size:,} characters; the limit is {MAX_REPLY_CHARS:,})",
        )
    try:
        return _parse(vocab, text, finish_reason, tool_calls)
    except FormatError:
        raise
    except RecursionError:
        raise FormatError(
            corrections.unreadable(vocab, "it is nested too deeply"),
            user="a reply was nested too deeply",
        ) from None
    except Exception as exc:  # a bug of ours: still a format error, never a crashed run
        log.exception("parse_actions failed on a %d-character reply", len(text))
        raise FormatError(
            corrections.unreadable(vocab, type(exc).__name__), user="a reply could not be read"
        ) from exc


def _parse(
    vocab: Vocabulary, text: str, finish_reason: str | None, tool_calls: list[dict[str, Any]] | None
) -> list[Action]:
    cut = finish_reason in ("length", "max_tokens")
    if tool_calls:
        calls = native_calls(vocab, tool_calls)
        if cut and calls and calls[-1].error is not None:
            # the arguments were cut off mid-JSON
            raise TruncatedReplyError(
                corrections.truncated(calls[-1].name, "arguments", "", cut=True)
            )
        if cut and calls:  # a reply the limit cut is truncated: none of it runs
            raise TruncatedReplyError(corrections.cut_after_actions([c.name for c in calls]))
        return [_validate(vocab, raw, cut=False, last=False) for raw in calls]

    text, examples = without_note_examples(text, vocab)
    scan = Scanner(text, vocab).run()
    found = scan.actions
    chosen = [a for a in found if not a.fenced] or found
    for raw in chosen:
        if raw.truncated is not None:
            raise TruncatedReplyError(
                corrections.truncated(raw.name, raw.truncated, _path_of(vocab, raw), cut=cut)
            )
    if not chosen:
        if scan.unclosed_reasoning:
            marker = scan.unclosed_marker
            if cut:
                raise TruncatedReplyError(corrections.unclosed_reasoning(vocab, marker, cut=True))
            raise FormatError(
                corrections.unclosed_reasoning(vocab, marker, cut=False),
                user="a reply never closed its reasoning block",
            )
        if cut:
            raise TruncatedReplyError(corrections.cut_before_action(vocab))
        if examples:
            raise FormatError(
                corrections.repeated_note(vocab),
                user="a reply repeated the service's format note (nothing from it was run)",
            )
        if scan.reasoning_calls:
            raise FormatError(
                corrections.call_in_reasoning(vocab, list(dict.fromkeys(scan.reasoning_calls))),
                user="a reply called a tool from its reasoning (nothing was run)",
            )
        if scan.header_in_analysis:
            raise FormatError(
                corrections.analysis_not_ended(vocab),
                user="a reply's reasoning ran into its next message (nothing was run)",
            )
        raise FormatError(
            corrections.no_action(vocab, list(dict.fromkeys(scan.mentions))),
            user="a reply held no action",
            words=not scan.mentions and not any(m in text for m in ("{", "```", "</", "/>")),
        )
    actions = [
        _validate(vocab, raw, cut=cut, last=i == len(chosen) - 1) for i, raw in enumerate(chosen)
    ]
    if cut:  # complete actions in a reply the limit cut: the reply is truncated, none runs
        raise TruncatedReplyError(corrections.cut_after_actions([a.type for a in actions]))
    return actions


def _path_of(vocab: Vocabulary, raw: RawAction) -> str:
    for name, value, _ in raw.params:
        if canonical_param(vocab.known.get(raw.name), name) == "path":
            return value.strip()
    return ""


def _validate(vocab: Vocabulary, raw: RawAction, *, cut: bool, last: bool) -> Action:
    if raw.error is not None:
        raise FormatError(raw.error, user=f"the arguments of a `{raw.name}` call were unreadable")
    if not raw.known:
        raise FormatError(
            corrections.unknown_action(vocab, raw.name),
            user=f"a reply asked for an unknown action `{raw.name}`",
        )
    spec = vocab.known[raw.name]
    allowed = (*spec.required, *spec.optional)
    params: dict[str, str] = {}
    warnings = list(raw.warnings)
    for index, (written, value, needs_cleaning) in enumerate(raw.params):
        name = canonical_param(spec, written)
        if name not in allowed:
            warnings.append(
                f"unknown parameter `{written}` of `{spec.name}` was ignored "
                f"(it takes: {', '.join(allowed)})"
            )
            continue
        if name in params:
            raise FormatError(
                corrections.duplicate_param(spec, name),
                user=f"`{spec.name}` gave `{name}` more than once",
            )
        if needs_cleaning:
            if name in spec.raw:
                value = clean_raw(value, raw.indents.get(index, ""))
            else:
                value = clean_plain(value)
        if name in _PATHS:
            value = trim_path(value)
        if name in (*_PATHS, "command") and "\x00" in value:
            raise FormatError(
                corrections.nul_character(spec.name, name),
                user=f"the `{name}` of `{spec.name}` held a NUL character",
            )
        joined = join_surrogates(value)
        if joined is None:
            raise FormatError(
                corrections.invalid_characters(spec.name, name),
                user=f"the `{name}` of `{spec.name}` held an invalid character (a lone surrogate)",
            )
        params[name] = joined
    missing = [p for p in spec.required if p not in params]
    if missing:
        if cut and last and not raw.closed:
            raise TruncatedReplyError(
                corrections.truncated(spec.name, missing[0], params.get("path", ""), cut=True)
            )
        raise FormatError(
            corrections.missing_params(spec, missing),
            user=f"`{spec.name}` was missing {', '.join(missing)}",
        )
    for name in _NON_EMPTY:
        if name in params and not params[name].strip():
            raise FormatError(
                corrections.empty_param(spec, name), user=f"`{spec.name}` had an empty `{name}`"
            )
    if "cwd" in params and not params["cwd"].strip():
        del params["cwd"]
    if spec.whole_file in params:
        inside = strip_wrapping_fence(params[spec.whole_file], params.get("path", ""))
        if inside is not None:
            params[spec.whole_file] = inside
            warnings.append(
                "the Markdown fence around the whole file was removed (write the file's text "
                "without a fence)"
            )
    return Action(spec.name, params, warnings)
