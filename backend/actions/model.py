"""Actions as the parser gives them: their specs, the parameter aliases, the format errors.

Which actions exist is a registry's (:class:`backend.actions.registry.Registry`); the names a
parser reads are its :class:`~backend.actions.vocabulary.Vocabulary`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ActionSpec:
    name: str
    description: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    # raw-text params whose bodies are kept byte-exact (file contents, commands)
    raw: tuple[str, ...] = ()
    example: str = ""
    # other names models use for it (e.g. `bash` for terminal_run): read wherever its name
    # is (an XML tag, `<function=…>`, `<invoke name=…>`, a JSON tool call)
    aliases: tuple[str, ...] = ()
    # the raw param that holds a whole file's text (beside ``path``): a Markdown fence the
    # model put around all of it is removed, with a warning
    whole_file: str = ""


# Parameter names models use for ours.
PARAM_ALIASES: dict[str, str] = {
    "file_path": "path",
    "filepath": "path",
    "filename": "path",
    "file": "path",
    "cmd": "command",
    "code": "content",
    "text": "content",
    "working_dir": "cwd",
    "workdir": "cwd",
    "summary": "message",
    "note": "message",
}


@dataclass
class Action:
    type: str
    params: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list, compare=False)


# A reply longer than this is refused with a FormatError before it is scanned.
MAX_REPLY_CHARS = 1_000_000


class FormatError(ValueError):
    """The reply holds no usable action. The message is written for the model;
    ``user`` says what went wrong in a person's words (never the format lessons);
    ``words``: the reply tried no action at all (an answer in words: a refusal, a question,
    prose), as opposed to an action it got wrong."""

    def __init__(self, message: str, user: str = "", *, words: bool = False) -> None:
        super().__init__(message)
        self.user = user or "a reply held no usable action"
        self.words = words


class TruncatedReplyError(FormatError):
    """The reply was cut off inside a value: never write a partial file."""

    def __init__(self, message: str, user: str = "") -> None:
        super().__init__(message, user or "a reply was cut off before its action was complete")


# More parameter names seen in the wild (JSON tool calls, other agents' tool schemas).
PARAM_ALIASES.update(
    {
        "filePath": "path",
        "file_name": "path",
        "contents": "content",
        "file_content": "content",
        "file_contents": "content",
        "command_line": "command",
        "directory": "cwd",
        "working_directory": "cwd",
        "result": "message",
        "old_string": "old_str",
        "old_text": "old_str",
        "old": "old_str",
        "search": "old_str",
        "new_string": "new_str",
        "new_text": "new_str",
        "new": "new_str",
        "replace": "new_str",
        # the tools' parameters
        "q": "query",
        "search_query": "query",
        "search_term": "query",
        "link": "url",
        "href": "url",
        "uri": "url",
        "tool": "name",
        "args": "arguments",
        "input": "arguments",
        "prompt": "question",
    }
)
