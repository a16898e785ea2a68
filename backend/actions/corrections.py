"""Error messages written for the model: what was wrong, then the format to use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.actions.model import ActionSpec

if TYPE_CHECKING:
    from backend.actions.vocabulary import Vocabulary


def signature(spec: ActionSpec) -> str:
    params = [*spec.required, *(f"{p}?" for p in spec.optional)]
    return f"{spec.name}({', '.join(params)})"


def allowed_actions(vocab: Vocabulary) -> str:
    return ", ".join(signature(spec) for spec in vocab.offered.values())


def format_help(vocab: Vocabulary) -> str:
    """The format lesson: every action each task is offered, its signature and example."""
    lines = [
        "Write each action as XML tags, with the raw text inside (no escaping, no CDATA "
        "needed), outside any code fence and after your reasoning:",
    ]
    for spec in vocab.offered.values():
        lines.append(f"- {signature(spec)}: {spec.description}")
        lines.append(f"  {spec.example}")
    lines.append("Allowed actions: " + ", ".join(vocab.offered) + ".")
    return "\n".join(lines)


def action_help(spec: ActionSpec) -> str:
    required = ", ".join(spec.required)
    optional = ", ".join(spec.optional) or "none"
    return (
        f"`{spec.name}` takes required parameter(s): {required}; optional: {optional}. "
        f"Example:\n{spec.example}"
    )


def no_action(vocab: Vocabulary, found_mentions: list[str]) -> str:
    head = "Your reply contains no action, so nothing was done."
    if found_mentions:
        head += (
            " (Found "
            + ", ".join(f"<{name}>" for name in found_mentions)
            + " without any parameters.)"
        )
    return f"{head}\n{format_help(vocab)}"


def repeated_note(vocab: Vocabulary) -> str:
    return (
        "Your reply repeated the format note's examples, which are not actions, so nothing "
        "was run. Write the action(s) this task needs next, with your own paths, commands "
        "and text.\n" + format_help(vocab)
    )


def call_in_reasoning(vocab: Vocabulary, names: list[str]) -> str:
    calls = ", ".join(f"`{name}`" for name in names)
    return (
        f"Your reply called {calls} from the analysis channel, which is reasoning, so nothing "
        "was run. Send a call in the commentary channel "
        "(`<|channel|>commentary to=functions.NAME`), or write the action(s) after your "
        "reasoning.\n" + format_help(vocab)
    )


def analysis_not_ended(vocab: Vocabulary) -> str:
    return (
        "Your analysis-channel message held the header of another message before its "
        "<|end|>, so all of it was read as reasoning and nothing was run. End the analysis "
        "message with <|end|> before the next message, or write the action(s) after your "
        "reasoning.\n" + format_help(vocab)
    )


def unknown_action(vocab: Vocabulary, name: str) -> str:
    return (
        f"Unknown action `{name}`. Allowed actions: {allowed_actions(vocab)}.\n{format_help(vocab)}"
    )


def missing_params(spec: ActionSpec, missing: list[str]) -> str:
    return (
        f"Action `{spec.name}` is missing required parameter(s): {', '.join(missing)}. "
        f"{action_help(spec)}"
    )


def empty_param(spec: ActionSpec, param: str) -> str:
    return f"Action `{spec.name}` has an empty `{param}`. {action_help(spec)}"


def duplicate_param(spec: ActionSpec, param: str) -> str:
    return (
        f"Action `{spec.name}` gives `{param}` more than once; give each parameter once. "
        f"{action_help(spec)}"
    )


def bad_arguments(vocab: Vocabulary, name: str, detail: str) -> str:
    return (
        f"The arguments of tool call `{name}` could not be read ({detail}). Give the "
        f"arguments as a JSON object of strings, or use the XML format.\n{format_help(vocab)}"
    )


def unclosed_reasoning(vocab: Vocabulary, marker: tuple[str, str], cut: bool) -> str:
    """`marker`: the block's opener and closer as the model writes them."""
    opener, closer = marker
    why = "was cut off inside" if cut else "never closed"
    return (
        f"Your reply {why} its {opener} reasoning block, so it holds no action. Keep the "
        f"reasoning short, close it with {closer}, then write the action(s).\n" + format_help(vocab)
    )


def truncated(action: str, param: str, path: str, cut: bool) -> str:
    where = f"`<{param}>` of `{action}`" + (f" for `{path}`" if path else "") + " was closed"
    why = "was cut off (it hit the output length limit)" if cut else "ended"
    if param == "arguments":  # a native/JSON tool call
        where = f"the arguments of `{action}` were complete"
    close = "" if param == "arguments" else f" Close every tag: </{param}> then </{action}>."
    return (
        f"Your reply {why} before {where}, so nothing from it was run and no "
        "partial file was written. Write the file in smaller parts: split it into several "
        "smaller files, or write a first part with write_code and add the rest in later "
        "replies with terminal_run (e.g. `cat >> file <<'EOF'`)." + close
    )


def cut_after_actions(names: list[str]) -> str:
    listed = ", ".join(f"`{n}`" for n in dict.fromkeys(names))
    return (
        f"Your reply was cut off (it hit the output length limit) after {listed}, so nothing "
        "from it was run: a cut reply may have lost what came next. Send a shorter reply: "
        "fewer actions at a time, little text around them, and a large file in smaller "
        "parts (several smaller files, or a first part with write_code and the rest added "
        "in later replies)."
    )


def cut_before_action(vocab: Vocabulary) -> str:
    return (
        "Your reply was cut off (it hit the output length limit) before any complete "
        "action, so nothing was done. Keep the text before the action short; if a file is "
        "large, write it in smaller parts: split it into several smaller files, or write a "
        "first part and add the rest in later replies.\n" + format_help(vocab)
    )


def too_large(size: int, limit: int) -> str:
    return (
        f"Your reply was {size:,} characters long; the limit is {limit:,}, so nothing from it "
        "was run. Write big files in smaller parts: split them into several files, or write a "
        "first part with write_code and add the rest in later replies."
    )


def invalid_characters(action: str, param: str) -> str:
    return (
        f"The `{param}` of `{action}` holds an invalid character (an unpaired UTF-16 "
        "surrogate, e.g. from the JSON escape \\ud800), which cannot be written as text, so "
        "nothing from the reply was run. Write real characters; to put such an escape "
        "sequence into a file, write it as the literal backslash text."
    )


def unreadable(vocab: Vocabulary, detail: str) -> str:
    return (
        f"Your reply could not be read ({detail}), so nothing from it was run. Write plain "
        "actions as shown below.\n" + format_help(vocab)
    )


def nul_character(action: str, param: str) -> str:
    return (
        f"The `{param}` of `{action}` holds a NUL character (\\0), which no path or command "
        "can contain, so nothing from the reply was run. Write it without the NUL."
    )
