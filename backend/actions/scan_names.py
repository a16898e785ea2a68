"""The scanner's patterns of every dialect's openers and closers (the ones that name actions
are a :class:`~backend.actions.vocabulary.Vocabulary`'s, made from its registry)."""

from __future__ import annotations

import re
from functools import lru_cache

from backend.actions.model import PARAM_ALIASES, ActionSpec
from backend.actions.scan_reasoning import MARKER_STARTS, REASONING_CLOSE, REASONING_OPEN

# `parameters`: Anthropic's legacy `<invoke><tool_name>…</tool_name><parameters>…` wrapper
WRAPPERS = (
    "function",
    "invoke",
    "tool_call",
    "tool_calls",
    "actions",
    "function_calls",
    "parameters",
)


@lru_cache(maxsize=64)
def _tag_open(name: str) -> re.Pattern[str]:
    return re.compile(_TAG_OPEN_FULL.format(name=re.escape(name)))


def canonical_param(spec: ActionSpec | None, name: str) -> str:
    if spec is None:
        return name
    params = (*spec.required, *spec.optional)
    for candidate in (name, name.lower()):
        if candidate in params:
            return candidate
        alias = PARAM_ALIASES.get(candidate)
        if alias in params:
            return alias
    return name


# ---------------------------------------------------------------------------- regexes

_TOP = re.compile(r"[<`~{\[" + MARKER_STARTS + "]")
_TAG = re.compile(r"<(/?)((?:[A-Za-z_][\w.-]*:)?[A-Za-z_][\w.-]*)")
_ATTR = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>/]+))""")
_TAG_OPEN_FULL = r"""<{name}((?:\s+[\w:.-]+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'<>/]+))*)\s*(/?)>"""
# every reasoning marker the scanner knows (backend/actions/scan_reasoning.py)
_THINK_OPEN = REASONING_OPEN
_THINK_CLOSE = REASONING_CLOSE
_FUNCTION_OPEN = re.compile(
    r"""<function(?:=\s*["']?([^\s"'<>]+)["']?|\s+name\s*=\s*["']([^"']+)["'][^<>]*)\s*>""",
    re.I,
)
_INVOKE_OPEN = re.compile(
    r"""<(?:[\w.-]+:|\uff5cDSML\uff5c)?invoke\s+name\s*=\s*["']([^"']+)["'][^<>]*>""",
    re.I,
)
# Anthropic's legacy tool use (Claude 2.1 era prompts, still written by models trained on
# them): `<function_calls><invoke><tool_name>NAME</tool_name><parameters><p>v</p>…`
_LEGACY_INVOKE_OPEN = re.compile(
    r"<(?:[\w.-]+:)?invoke\s*>\s*<tool_name>\s*([\w.-]+)\s*</tool_name>\s*(?:<parameters>)?",
    re.I,
)
# Qwen3's malformed parameter openers: the `>` dropped after the name (`<parameter=path\n…`)
# or the value written into the opener (`<parameter=command=str_replace</parameter>`)
_PARAM_MALFORMED_OPEN = re.compile(
    r"<(?:[\w.-]+:)?parameter=\s*([A-Za-z_][\w.-]*)(?:=|[ \t]*(?=\r?\n))",
    re.I,
)
# `<parameter=NAME>`, `<parameter name="NAME">` and the malformed variants models write:
# `name=NAME` unquoted, `<param …>`, `<argument …>`, `<arg …>` (group 1 is the tag word)
_PARAM_STYLE_OPEN = re.compile(
    r"""<(?:[\w.-]+:|\uff5cDSML\uff5c)?(parameter|param|argument|arg)"""
    r"""(?:=\s*["']?([^\s"'<>]+)["']?"""
    r"""|\s+name\s*=\s*(?:"([^"<>]*)"|'([^'<>]*)'|([^\s"'<>/]+))[^<>]*)\s*>""",
    re.I,
)
_PARAM_TAG_OPEN = re.compile(r"<([A-Za-z_][\w.-]*)((?:\s[^<>]*)?)(/?)>")
_CDATA = "<![CDATA["
_MAX_JSON_FAILURES = 64  # each failed attempt costs O(position) in the json module
_FENCE_INFO = re.compile(r"[\w+#.-]*[ \t]*\r?\n")
_ACTION_CLOSE_OK = re.compile(r"""[^"'`\\)\]},;+]|\Z""")
# GLM-4.5: `<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>…</tool_call>`
_GLM_OPEN = re.compile(
    r"<((?:[\w.-]+:)?tool_call)>[ \t]*([A-Za-z_][\w.-]*)[ \t]*\r?\n?\s*(?=<arg_key>)"
)
_ARG_KEY = re.compile(r"<arg_key>\s*([^<>]+?)\s*</arg_key>\s*<arg_value>")
# Vendor tool-call markers followed by a name and JSON arguments (docs/dialects.md):
# DeepSeek V3 `<|tool_call_begin|>function<|tool_sep|>NAME\n```json\n{…}\n```` and V3.1
# `<|tool_call_begin|>NAME<|tool_sep|>{…}` (written with U+FF5C bars and U+2581 for the
# underscores); Kimi K2
# `<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}`; gpt-oss (harmony)
# `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}`.
_DS_BAR = "\uff5c"  # DeepSeek's fullwidth vertical line
_DSML = f"<{_DS_BAR}DSML{_DS_BAR}"  # DeepSeek V3.2's tag prefix
_DEEPSEEK_CALL = re.compile(
    f"<{_DS_BAR}tool\u2581call\u2581begin{_DS_BAR}>"
    + r"\s*([\w.-]+)\s*"
    + f"<{_DS_BAR}tool\u2581sep{_DS_BAR}>"
    + r"[ \t]*(?:([\w.-]+)[ \t]*(?=\r?\n|```))?"
)
_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*(?:functions\.)?([\w.-]+?)(?::\d+)?\s*"
    r"<\|tool_call_argument_begin\|>"
)
_HARMONY_CALL = re.compile(
    r"<\|(?:start|channel)\|>[^<>\n]{0,80}?\bto=(?:functions\.)?([\w.-]+)"
    r"(?:[^<>]|<\|(?:channel|constrain)\|>){0,120}?<\|message\|>"
)
# Mistral (tokenizer v11+): `[TOOL_CALLS]NAME[ARGS]{…}`, optionally `[CALL_ID]id` before
# `[ARGS]`; the older `[TOOL_CALLS][{…}]` is a JSON list and read as such
_MISTRAL_CALL = re.compile(
    r"\[TOOL_CALLS\][ \t]*([A-Za-z_][\w.-]*)[ \t]*(?:\[CALL_ID\][ \t]*[\w-]*[ \t]*)?\[ARGS\]"
)
_JSON_FENCE = re.compile(r"\s*(?:```|~~~)[\w-]*[ \t]*\r?\n")


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)
