"""The planner's reply -> (prose before the plan, tasks). Pure.

Accepted (first that yields tasks wins):
1. JSON: an array of task objects, or an object with a "tasks"/"plan" array of them, that
   the reply presents as its plan: on lines of its own (or after a label ending in ":"),
   bare, in a ```json (or unlabelled) fence, or with prose around it. An array inside code
   (a fence of another language, an assignment, a call's argument) or inside a sentence is
   no plan, and neither are bare strings (`["a", "b"]`) nor the tasks of the service's own
   example (EXAMPLE, which its notes to the model carry);
2. Markdown `##`/`###` headings, one per task, with bullet points under each;
3. a numbered list (`1.` / `1)`), one item per task, with indented lines or bullets.
Reasoning (`<think>…</think>` and the other markers of docs/dialects.md, harmony `analysis`
messages, or everything before a `</think>` with no opener) is dropped first. Each task is
{"title", "description", "requirement"} ("" when absent).
"""

from __future__ import annotations

import json
import re
from typing import Any

from backend.actions.scan_reasoning import REASONING_CLOSE, REASONING_OPEN, without_harmony

_DECODER = json.JSONDecoder(strict=False)
MAX_REPLY_CHARS = 1_000_000  # as for actions (backend/actions/model.py)
_MAX_JSON_ATTEMPTS = 32  # each failed attempt costs O(length)
_THINK_CLOSE = REASONING_CLOSE
_THINK_OPEN = REASONING_OPEN
_FENCE_OPEN = re.compile(r"(?:^|\n)[ \t]*(`{3,}|~{3,})[\w+-]*[ \t]*\n?$")
# the fence a position is inside, if any: its language ("" when unlabelled)
_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$", re.M)
_JSON_FENCES = ("", "json", "jsonc", "json5")
# words ending in ":" before a plan on its line ("Here is the plan:"), never code or a quote
_LABEL_BEFORE = re.compile(r"[^\[\]{}()=\"'`<>;]{0,120}:[*_]*")
_TRAILING_COMMA = re.compile(r",(\s*[\]}])")
_HEADING = re.compile(r"^[ \t]{0,3}#{2,3}[ \t]+(.+?)[ \t#]*$", re.M)
_NUMBERED = re.compile(r"^[ \t]{0,3}(?:\*\*)?(\d{1,3})[.)](?:\*\*)?[ \t]+(.+)$", re.M)
_BULLET = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+(.*)$")
_LABEL = re.compile(
    r"^(?:\*\*|__)?(title|task|description|details|requirements?|acceptance(?: criteria)?"
    r"|done when|success criteria|verification)(?:\*\*|__)?\s*[:\uff1a-]\s*(?:\*\*|__)?\s*(.*)$",
    re.I,
)
_TITLE_PREFIX = re.compile(
    r"^(?:(?:task|step|phase)\s*\d+\s*[:.)\-\u2013\u2014]\s*|\d{1,3}[.)]\s+)", re.I
)
_BOLD_LEAD = re.compile(r"^\*\*(.+?)\*\*\s*[:\-\u2013\u2014]?\s*(.*)$")

TITLE_KEYS = ("title", "name", "task", "step", "summary")
DESCRIPTION_KEYS = ("description", "details", "desc", "detail", "instructions", "steps")
REQUIREMENT_KEYS = (
    "requirement",
    "requirements",
    "acceptance",
    "acceptance_criteria",
    "done_when",
    "success_criteria",
    "verification",
)

EXAMPLE = (
    '```json\n[\n  {"title": "Write the script", "description": "Create src/app.py that …", '
    '"requirement": "python3 src/app.py prints …"},\n  {"title": "…", "description": "…"}\n]\n```'
)


# the tasks of EXAMPLE, which are never a plan (a reply that repeats the note has no plan)
EXAMPLE_TASKS = [
    {
        "title": "Write the script",
        "description": "Create src/app.py that …",
        "requirement": "python3 src/app.py prints …",
    },
    {"title": "…", "description": "…", "requirement": ""},
]


class PlanFormatError(ValueError):
    """The plan could not be read. The message is written for the model; ``user`` says what
    went wrong in a person's words (never the format lesson); ``words``: the reply held no
    attempt at a plan at all (an answer in words: a refusal, a question, prose)."""

    def __init__(self, message: str, user: str = "", *, words: bool = False) -> None:
        super().__init__(message)
        self.user = user or "it could not be read as a task list"
        self.words = words


def cut_plan() -> PlanFormatError:
    """A planning reply the output length limit cut (finish_reason "length"): truncated,
    never read as a plan."""
    return PlanFormatError(
        "Your plan was cut off (it hit the output length limit), so it was not used. Reply "
        "with a short plan: one sentence for the user, then a JSON array of a few tasks with "
        f"short descriptions:\n{EXAMPLE}",
        "it was cut off at the output length limit",
    )


def parse_plan(text: str) -> tuple[str, list[dict[str, str]]]:
    """Never raises anything but PlanFormatError: a reply over MAX_REPLY_CHARS or nested
    too deeply is a format error too."""
    if len(text) > MAX_REPLY_CHARS:
        raise PlanFormatError(
            f"Your plan was {len(text):,} characters long; the limit is {MAX_REPLY_CHARS:,}. "
            "Reply with a short plan: a sentence for the user, then a JSON array of a few "
            f"tasks:\n{EXAMPLE}",
            f"it was too long ({len(text):,} characters; the limit is {MAX_REPLY_CHARS:,})",
        )
    try:
        return _parse_plan(text)
    except RecursionError:
        raise PlanFormatError(
            "Your plan is nested too deeply to read. Reply with a flat JSON array of tasks:\n"
            + EXAMPLE,
            "it was nested too deeply to read",
        ) from None


def _parse_plan(text: str) -> tuple[str, list[dict[str, str]]]:
    text = _drop_reasoning(text)
    seen = _NotAPlan()
    found = _from_json(text, seen)
    if found is None:
        found = _from_headings(text) or _from_numbered(text)
    if found is None:
        if seen.example:
            raise PlanFormatError(
                "Your reply repeated the example of the instructions, which is no plan. "
                "Reply with a short sentence for the user, then the plan for this goal as a "
                "JSON array of tasks, each with a title, a description and optionally a "
                f"requirement (how to check it is done), in this shape:\n{EXAMPLE}",
                "it repeated the service's example instead of giving a plan",
            )
        if seen.embedded:
            raise PlanFormatError(
                "Your reply held no plan: a list inside code, a call or a sentence is not a "
                "plan. Reply with a short sentence for the user, then the plan on lines of "
                "its own as a JSON array of tasks, each with a title, a description and "
                f"optionally a requirement (how to check it is done):\n{EXAMPLE}",
                "it held no plan (only a list inside code or a sentence)",
            )
        detail = f" (the JSON in it did not parse: {seen.json_error})" if seen.json_error else ""
        raise PlanFormatError(
            f"Your plan could not be read{detail}. Reply with a short sentence for the user, "
            f"then the plan as a JSON array of tasks, each with a title, a description and "
            f"optionally a requirement (how to check it is done):\n{EXAMPLE}",
            "its task list did not parse" if seen.json_error else "it held no task list",
            words=not seen.json_error and not _looks_structured(text),
        )
    prose, tasks = found
    if not tasks:
        raise PlanFormatError(
            "The plan is empty. Give at least one task, as a JSON array of tasks:\n" + EXAMPLE,
            "its task list was empty",
        )
    return prose.strip(), tasks


# ------------------------------------------------------------------------ helpers


def reply_words(text: str) -> str:
    """A reply without its ``<think>`` reasoning: what the model said to the person."""
    return _drop_reasoning(text).strip()


def _looks_structured(text: str) -> bool:
    """The reply tried some structure (JSON, a code block, a tag): a format problem, not
    an answer in words."""
    return any(mark in text for mark in ("{", "[", "```", "</", "/>"))


def _drop_reasoning(text: str) -> str:
    text = without_harmony(text)
    kept: list[str] = []
    pos = 0
    opener = _THINK_OPEN.search(text)
    close = _THINK_CLOSE.search(text)
    while True:
        if opener is not None and opener.start() < pos:
            opener = _THINK_OPEN.search(text, pos)
        if close is not None and close.start() < pos:
            close = _THINK_CLOSE.search(text, pos)
        if close is not None and (opener is None or close.start() < opener.start()):
            # a closer with no opener: everything before it was reasoning
            kept = []
            pos = close.end()
            continue
        if opener is None:
            kept.append(text[pos:])
            break
        kept.append(text[pos : opener.start()])
        if close is None:  # never closed
            break
        pos = close.end()
    return "".join(kept)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return "\n".join(f"- {_text(v)}" for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _pick(obj: dict[str, Any], keys: tuple[str, ...]) -> str:
    lowered = {str(k).lower().replace(" ", "_"): v for k, v in obj.items()}
    for key in keys:
        if key in lowered:
            return _text(lowered[key])
    return ""


def _task(title: str, description: str = "", requirement: str = "") -> dict[str, str]:
    title = title.strip().strip("*_").strip()
    if not title:
        title = description.strip().splitlines()[0][:120] if description.strip() else ""
    return {"title": title, "description": description.strip(), "requirement": requirement.strip()}


def _tasks_from_value(value: Any) -> list[dict[str, str]] | None:
    """The tasks of a plan-shaped value: an array of task objects (each with a title), or
    an object holding one under "tasks"/"plan"/"steps". Bare strings are no task."""
    if isinstance(value, dict):
        for key in ("tasks", "plan", "steps"):
            inner = value.get(key)
            if isinstance(inner, list):
                return _tasks_from_value(inner)
        return None
    if not isinstance(value, list):
        return None
    tasks: list[dict[str, str]] = []
    for item in value:
        if not isinstance(item, dict):
            return None
        task = _task(
            _pick(item, TITLE_KEYS),
            _pick(item, DESCRIPTION_KEYS),
            _pick(item, REQUIREMENT_KEYS),
        )
        if not task["title"]:
            return None
        tasks.append(task)
    return tasks


class _NotAPlan:
    """What the JSON search saw when it found no plan: a reason for the model, if any."""

    def __init__(self) -> None:
        self.json_error = ""
        self.embedded = False  # a plan-shaped array inside code or a sentence
        self.example = False  # only the service's own example


def _from_json(text: str, seen: _NotAPlan) -> tuple[str, list[dict[str, str]]] | None:
    """(prose, tasks) of the first JSON plan the reply presents as its plan."""
    attempts = 0
    for m in re.finditer(r"[\[{]", text):
        start = m.start()
        after = text[start + 1 : start + 200].lstrip()
        if text[start] == "[" and not after.startswith(("{", "]")):
            continue
        if text[start] == "{" and not after.startswith(('"', "}")):
            continue
        attempts += 1
        if attempts > _MAX_JSON_ATTEMPTS:
            break
        value, err, end = _decode(text, start, repair=attempts <= 3)
        if value is None:
            seen.json_error = seen.json_error or err
            continue
        tasks = _tasks_from_value(value)
        if tasks is None:
            continue
        if not _stands_alone(text, start, end):
            seen.embedded = True
            continue
        if tasks and all(task in EXAMPLE_TASKS for task in tasks):
            seen.example = True
            continue
        return _prose_before(text, start), tasks
    return None


def _stands_alone(text: str, start: int, end: int) -> bool:
    """Whether the JSON value at text[start:end] is presented as the plan: nothing but a
    label ending in ":" before it on its line, nothing after it on its line, and not inside
    a fence of a language other than JSON."""
    line_start = text.rfind("\n", 0, start) + 1
    before = text[line_start:start].strip()
    if before and not _LABEL_BEFORE.fullmatch(before):
        return False
    line_end = text.find("\n", end)
    after = text[end : len(text) if line_end < 0 else line_end].strip()
    if after:
        return False
    language = _fence_language(text, start)
    return language is None or language.lower() in _JSON_FENCES


def _fence_language(text: str, pos: int) -> str | None:
    """The language of the fence ``pos`` is inside ("" when unlabelled), or None."""
    language: str | None = None
    marker = ""
    for fence in _FENCE_LINE.finditer(text, 0, pos):
        if language is None:
            marker, language = fence.group(1), fence.group(2)
        elif fence.group(1)[0] == marker[0] and len(fence.group(1)) >= len(marker):
            language = None  # closed
    return language


def _decode(text: str, start: int, *, repair: bool) -> tuple[Any, str, int]:
    """(the value at ``start``, "", where it ends) or (None, why it did not parse, start)."""
    try:
        value, end = _DECODER.raw_decode(text, start)
        return value, "", end
    except json.JSONDecodeError as exc:
        first = exc
    # a common slip: trailing commas. Retry on the balanced span with them removed.
    balanced = _balanced_end(text, start) if repair else None
    if balanced is not None:
        try:
            fixed = _TRAILING_COMMA.sub(r"\1", text[start:balanced])
            return _DECODER.decode(fixed), "", balanced
        except json.JSONDecodeError:
            pass
    return None, f"{first.msg} at line {first.lineno} column {first.colno}", start


def _balanced_end(text: str, start: int) -> int | None:
    depth = 0
    in_str = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _prose_before(text: str, start: int) -> str:
    prose = text[:start]
    fence = _FENCE_OPEN.search(prose)
    if fence is not None:
        prose = prose[: fence.start()]
    return prose.rstrip()


def _split_body(lines: list[str]) -> tuple[str, str]:
    """Bullet/plain lines under a task -> (description, requirement)."""
    description: list[str] = []
    requirement: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        bullet = _BULLET.match(line)
        content = bullet.group(1).strip() if bullet else line.strip()
        label = _LABEL.match(content)
        if label:
            kind = label.group(1).lower()
            rest = label.group(2).strip().strip("*_").strip()
            if kind.startswith(("requirement", "acceptance", "done", "success", "verif")):
                requirement.append(rest)
                continue
            if kind in ("description", "details"):
                description.append(rest)
                continue
        description.append(f"- {content}" if bullet else content)
    return "\n".join(d for d in description if d), "\n".join(r for r in requirement if r)


def _clean_title(raw: str) -> tuple[str, str]:
    """Heading or item text -> (title, inline description after a bold title)."""
    title = _TITLE_PREFIX.sub("", raw.strip())
    bold = _BOLD_LEAD.match(title)
    if bold:
        return bold.group(1).strip(), bold.group(2).strip()
    if title.startswith("**") and title.endswith("**"):
        title = title[2:-2]
    return title.strip(), ""


def _from_headings(text: str) -> tuple[str, list[dict[str, str]]] | None:
    heads = list(_HEADING.finditer(text))
    if not heads:
        return None
    tasks: list[dict[str, str]] = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        title, inline = _clean_title(head.group(1))
        lines = text[head.end() : end].splitlines()
        description, requirement = _split_body(lines)
        if inline:
            description = f"{inline}\n{description}".strip()
        if re.fullmatch(r"(?:the\s+)?plan|tasks?|steps?|summary|overview", title, re.I):
            continue  # a heading over the plan, not a task
        tasks.append(_task(title, description, requirement))
    return text[: heads[0].start()], tasks


def _from_numbered(text: str) -> tuple[str, list[dict[str, str]]] | None:
    items = list(_NUMBERED.finditer(text))
    if not items:
        return None
    tasks: list[dict[str, str]] = []
    for i, item in enumerate(items):
        end = items[i + 1].start() if i + 1 < len(items) else len(text)
        title, inline = _clean_title(item.group(2))
        body = text[item.end() : end]
        # the list ends at a blank line followed by unindented prose
        tail = re.search(r"\n[ \t]*\n(?=\S)", body)
        if tail is not None and i + 1 == len(items):
            body = body[: tail.start()]
        label = _LABEL.match(title)
        description, requirement = _split_body(body.splitlines())
        if inline:
            inline_label = _LABEL.match(inline)
            if inline_label and inline_label.group(1).lower().startswith("requirement"):
                requirement = f"{inline_label.group(2)}\n{requirement}".strip()
            else:
                description = f"{inline}\n{description}".strip()
        if label:
            title = label.group(2)
        tasks.append(_task(title, description, requirement))
    return text[: items[0].start()], tasks
