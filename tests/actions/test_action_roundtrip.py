"""Round trip: file content rendered the way the prompt asks, with noise around, parses
back byte-exact.

The renderer (documented in docs/dialects.md) writes

    <write_code>\\n<path>{path}</path>\\n<content>\\n{body}</content>\\n</write_code>

i.e. one newline after `<content>` (the parser drops exactly one) and nothing added before
`</content>` (the parser keeps the final newline, so a file ending in "\\n" looks like the
usual `…\\n</content>`). `body` is the content as is, except when the raw form would be
read differently; then it is `<![CDATA[\n…]]>` (the newline after the opener is dropped like
the one after `<content>`) with `]]>` split as `]]]]><![CDATA[>`. (A fence wrapping a whole
non-Markdown file is taken off by policy, so such contents are left out.) CDATA is used when:
- the content is wholly CDATA (it would be unwrapped) or consistently entity-escaped
  (it would be decoded once);
- it ends in a newline followed by spaces/tabs (read as the closing tag's indentation);
- it opens a CDATA section at a line start or after a tag and never closes it (a reader
  takes `<![CDATA[` there as the start of an opaque section);
- it holds `</content>` followed by whitespace and `<` or a fence, or a `</write_code>`
  not inside a quoted string: a raw body like that is ambiguous for any reader.
`test_roundtrip_raw_structured` then checks the hard raw cases on their own: quoted close
tags, whole nested actions, Atom-like `<content>` elements, unbalanced close tags in code.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from backend.actions import parse_actions
from backend.actions.values import is_consistently_escaped, strip_wrapping_fence

FRAGMENTS = [
    "</content>",
    "</content>\n",
    "]]>",
    "<![CDATA[",
    "]]]]><![CDATA[>",
    "&amp;",
    "&lt;",
    "&",
    "<",
    ">",
    "```",
    "```python\n",
    "~~~",
    "<write_code>",
    "</write_code>",
    "<content>",
    "<path>x</path>",
    "<think>",
    "</think>",
    "<!--",
    "-->",
    '{"name": "finish", "arguments": {"message": "x"}}',
    "`<finish>`",
    "    ",
    "\t",
    "\r\n",
    "\n",
    "\n\n",
    "null",
    "if a < b and c>d:",
    "2>&1 && cat < f",
    "<parameter=path>",
    "</parameter>",
    "é✓",
]

content_st = st.lists(
    st.one_of(
        st.sampled_from(FRAGMENTS),
        st.text(alphabet="ab <>&/\n\"'`;)", max_size=6),
    ),
    max_size=14,
).map("".join)

_AMBIGUOUS = re.compile(r"</content\s*>\s*(?:<|```|~~~)|</write_code\s*>(?![\"'`\\)\]},;+])", re.I)
_TRAILING_INDENT = re.compile(r"\n[ \t]+\Z")
# a CDATA opener at a line start or after a tag with no `]]>` after it
_UNCLOSED_CDATA = re.compile(r"(?:\A|[\n>])[ \t]*<!\[CDATA\[(?!.*\]\]>)", re.S)


def raw_is_safe(content: str) -> bool:
    stripped = content.strip()
    if stripped.startswith("<![CDATA[") and stripped.endswith("]]>"):
        return False
    if is_consistently_escaped(content) or _TRAILING_INDENT.search(content):
        return False
    if _UNCLOSED_CDATA.search(content):
        return False
    return _AMBIGUOUS.search(content) is None


def cdata(content: str) -> str:
    return "<![CDATA[\n" + content.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def render(path: str, content: str, *, raw: bool | None = None) -> str:
    body = content if (raw_is_safe(content) if raw is None else raw) else cdata(content)
    return f"<write_code>\n<path>{path}</path>\n<content>\n{body}</content>\n</write_code>"


path_st = st.from_regex(
    r"[a-z][a-z0-9_]{0,8}(/[a-z0-9_]{1,8}){0,2}\.(py|md|txt|xml)", fullmatch=True
)
prose_st = st.lists(
    st.sampled_from(
        ["Sure.", "I'll write it.", "a < b", "x & y", "`inline`", "<b>bold</b>", "\n", " ", "—"]
    ),
    max_size=6,
).map(" ".join)


@st.composite
def reply_st(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    files = draw(st.lists(st.tuples(path_st, content_st), min_size=1, max_size=3))
    parts: list[str] = []
    reasoning = draw(st.sampled_from(["none", "block", "stray"]))
    draft = "<finish><message>draft</message></finish>"
    if reasoning == "block":
        parts.append(f"<think>\nLet me plan. {draft}\n</think>\n")
    elif reasoning == "stray":
        parts.append(f"Planning without an opener. {draft}\n</think>\n")
    fenced = draw(st.booleans())
    example = draw(st.booleans()) and not fenced
    if example:
        parts.append("The format is:\n```xml\n<read_file><path>example</path></read_file>\n```\n")
    for path, content in files:
        parts.append(draw(prose_st) + "\n")
        action = render(path, content)
        parts.append(f"```xml\n{action}\n```\n" if fenced else action + "\n")
    parts.append(draw(prose_st))
    return "".join(parts), files


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reply_st())
def test_roundtrip(reply: tuple[str, list[tuple[str, str]]]) -> None:
    text, files = reply
    # a fence around a whole non-Markdown file is taken off by policy (corpus: fence-*)
    assume(all(strip_wrapping_fence(c, p) is None for p, c in files))
    actions = parse_actions(text)
    assert [(a.type, a.params) for a in actions] == [
        ("write_code", {"path": p, "content": c}) for p, c in files
    ]


# ---------------------------------------------------------------- hard raw cases

_SAFE_TEXT = st.text(alphabet="abc xyz()=.:\n\t&>", max_size=12)
_STRUCTURED = st.one_of(
    _SAFE_TEXT,
    st.sampled_from(
        [
            'TAIL = "</content></write_code>"\n',
            "s = '</content>\\n</write_code>'\n",
            'end = text.find("</content>")\n',
            "re.compile(r'<content>(.*?)</content>')\n",
            '  <content type="html">x</content>\n',
            "<entry><content>y</content></entry>\n",
            "</content>)",
            "see `</write_code>`; ",
        ]
    ),
    st.builds(
        lambda p, c: render(p, c, raw=True) + "\n",
        path_st,
        st.text(alphabet="abc \n<>&", max_size=10),
    ),
)


@settings(max_examples=300, deadline=None)
@given(path_st, st.lists(_STRUCTURED, max_size=8).map("".join), st.booleans())
def test_roundtrip_raw_structured(path: str, content: str, two: bool) -> None:
    """Raw bodies holding quoted close tags and whole nested actions, alone or followed by
    a second action."""
    if _TRAILING_INDENT.search(content) or is_consistently_escaped(content):
        content += "\n"
    assume(strip_wrapping_fence(content, path) is None)
    text = render(path, content, raw=True)
    expected = [("write_code", {"path": path, "content": content})]
    if two:
        text += "\nNow run it.\n<terminal_run><command>cat x</command></terminal_run>"
        expected.append(("terminal_run", {"command": "cat x"}))
    assert [(a.type, a.params) for a in parse_actions(text)] == expected
