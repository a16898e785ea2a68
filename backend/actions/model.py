"""The action vocabulary: one table that the parser, the prompts and the runtimes share."""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.messages.kinds import ActionType


@dataclass(frozen=True)
class ActionSpec:
    name: str
    description: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    # raw-text params whose bodies are kept byte-exact (file contents, commands)
    raw: tuple[str, ...] = ()
    example: str = ""


ACTIONS: dict[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec(
            name=ActionType.WRITE_CODE,
            description="Create or overwrite a text file in the workspace with the exact content.",
            required=("path", "content"),
            raw=("content",),
            example="<write_code><path>src/app.py</path><content>\nprint('hi')\n</content></write_code>",
        ),
        ActionSpec(
            name=ActionType.EDIT_FILE,
            description=(
                "Replace one exact occurrence of old_str in an existing file with new_str "
                "(old_str must match the file exactly, whitespace included, and occur once; "
                "new_str may be empty). Cheaper than rewriting a big file."
            ),
            required=("path", "old_str", "new_str"),
            raw=("old_str", "new_str"),
            example=(
                "<edit_file><path>src/app.py</path><old_str>print('hi')</old_str>"
                "<new_str>print('hello')</new_str></edit_file>"
            ),
        ),
        ActionSpec(
            name=ActionType.TERMINAL_RUN,
            description=(
                "Run a shell command in the workspace (or in cwd, relative to it). "
                "Returns the exit code, stdout and stderr. Long-running servers are killed "
                "after the timeout: never start one in the foreground."
            ),
            required=("command",),
            optional=("cwd",),
            raw=("command",),
            example=(
                "<terminal_run><command>python3 src/app.py</command><cwd>.</cwd></terminal_run>"
            ),
        ),
        ActionSpec(
            name=ActionType.READ_FILE,
            description="Read a text file from the workspace.",
            required=("path",),
            example="<read_file><path>src/app.py</path></read_file>",
        ),
        ActionSpec(
            name=ActionType.FINISH,
            description="End the current task with a short note of what was done.",
            required=("message",),
            raw=("message",),
            example="<finish><message>Wrote src/app.py and ran it.</message></finish>",
        ),
    )
}

# Actions that are not sandbox actions (backend/tools): parsed in every dialect like the
# ones above, but offered to the model only where the server configures them (CONTRACT 11),
# so they are kept out of ACTIONS, which the prompts list.
TOOL_ACTIONS: dict[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec(
            name="web_search",
            description="Search the web; returns titles, links and snippets.",
            required=("query",),
            example="<web_search><query>python 3.13 release notes</query></web_search>",
        ),
        ActionSpec(
            name="web_fetch",
            description="Read a web page (or a PDF) as Markdown, with its title and links.",
            required=("url",),
            example="<web_fetch><url>https://docs.python.org/3/whatsnew/</url></web_fetch>",
        ),
        ActionSpec(
            name="mcp_tool",
            description=(
                "Call a tool of an MCP server by its name `server__tool`, with its arguments "
                "as a JSON object."
            ),
            required=("name", "arguments"),
            raw=("arguments",),
            example=(
                '<mcp_tool><name>files__search</name><arguments>{"pattern": "TODO"}'
                "</arguments></mcp_tool>"
            ),
        ),
        ActionSpec(
            name="ask_user",
            description="Ask the person a question and wait for the answer.",
            required=("question",),
            raw=("question",),
            example="<ask_user><question>Which database should I use?</question></ask_user>",
        ),
    )
}

# every action the parser reads: the sandbox ones and the tools
KNOWN_ACTIONS: dict[str, ActionSpec] = {**ACTIONS, **TOOL_ACTIONS}

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

    @property
    def spec(self) -> ActionSpec:
        return KNOWN_ACTIONS[self.type]


# A reply longer than this is refused with a FormatError before it is scanned.
MAX_REPLY_CHARS = 1_000_000


class FormatError(ValueError):
    """The reply holds no usable action. The message is written for the model;
    ``user`` says what went wrong in a person's words (never the format lessons)."""

    def __init__(self, message: str, user: str = "") -> None:
        super().__init__(message)
        self.user = user or "a reply held no usable action"


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

# Action names models use for ours. Names with an underscore are also accepted as XML tags;
# the short ones (`bash`, `shell`) only where the name is explicit (`<function=…>`,
# `<invoke name=…>`, JSON tool calls), since `<bash>` in prose is too common to trust.
ACTION_ALIASES: dict[str, str] = {
    "write_file": "write_code",
    "create_file": "write_code",
    "run_command": "terminal_run",
    "execute_command": "terminal_run",
    "run_terminal_cmd": "terminal_run",
    "run_shell_command": "terminal_run",
    "execute_bash": "terminal_run",
    "bash": "terminal_run",
    "shell": "terminal_run",
    "attempt_completion": "finish",
    "finish_task": "finish",
    "str_replace": "edit_file",
    "replace_in_file": "edit_file",
    "edit": "edit_file",
    # the tools
    "search": "web_search",
    "websearch": "web_search",
    "search_web": "web_search",
    "google_search": "web_search",
    "fetch": "web_fetch",
    "fetch_url": "web_fetch",
    "browse": "web_fetch",
    "open_url": "web_fetch",
    "read_url": "web_fetch",
    "use_mcp_tool": "mcp_tool",
    "call_mcp_tool": "mcp_tool",
    "ask_followup_question": "ask_user",
    "ask_human": "ask_user",
}
