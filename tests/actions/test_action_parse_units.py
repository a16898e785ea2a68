"""Focused checks beside the corpus: thinking, values, native calls, messages."""

from __future__ import annotations

from typing import Any

import pytest

from backend.actions import (
    Action,
    FormatError,
    TruncatedReplyError,
    builtin_registry,
    extract_thinking,
    parse_actions,
)
from backend.actions.values import clean_plain, clean_raw, decode_entities, unwrap_cdata

ACTIONS = builtin_registry().vocabulary.offered  # every task's (the format lesson lists them)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think> x <thinking>b</thinking>", ["a", "b"]),
        ("plan first </think> <read_file path='a'/>", ["plan first"]),
        ("<think>never closed", ["never closed"]),
        ("no reasoning", []),
        ("<write_code><path>a</path><content><think>no</think></content></write_code>", []),
        ("`<think>` is a tag", []),
        (
            "<|channel|>analysis<|message|>check a<|end|><|start|>assistant<|channel|>final"
            "<|message|><finish>ok</finish><|return|>",
            ["check a"],
        ),
        (
            "<reasoning>r</reasoning>[THINK]m[/THINK]\u25c1think\u25b7k\u25c1/think\u25b7",
            ["r", "m", "k"],
        ),
        ("<|START_THINKING|>c<|END_THINKING|>", ["c"]),
        ("<|channel|>analysis<|message|>never ended", ["never ended"]),
    ],
)
def test_extract_thinking(text: str, expected: list[str]) -> None:
    assert extract_thinking(text) == expected


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("\nx\n", "x\n"),
        ("\r\nx\r\n", "x\r\n"),
        ("\nx\n    ", "x\n"),
        ("x", "x"),
        ("\n\nx", "\nx"),
        ("<![CDATA[a]]>", "a"),
        ("\n  <![CDATA[\n#!/bin/sh\n]]>\n", "#!/bin/sh\n"),
        ("<![CDATA[a]]]]><![CDATA[>b]]>", "a]]>b"),
        ("<![CDATA[a ]]> b]]>", "a ]]> b"),
        ("<![CDATA[&amp;]]>", "&amp;"),
        ("a &lt; b", "a < b"),
        ("a &amp;lt; b", "a &lt; b"),
        ("a &lt; b & c", "a &lt; b & c"),
        ("<a>&amp;</a>", "<a>&amp;</a>"),
        ("&#65;&#x42;", "AB"),
        ("null", "null"),
    ],
)
def test_clean_raw(raw: str, value: str) -> None:
    assert clean_raw(raw) == value


def test_clean_plain_and_helpers() -> None:
    assert clean_plain("  src/a.py\n") == "src/a.py"
    assert clean_plain("<![CDATA[ a b ]]>") == "a b"
    assert decode_entities("no entities") == "no entities"
    assert unwrap_cdata("x <![CDATA[y]]>") is None


def test_native_calls_win_over_text() -> None:
    calls: list[dict[str, Any]] = [
        {"id": "1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
    ]
    with pytest.raises(FormatError, match="missing required parameter"):
        parse_actions("<finish>x</finish>", tool_calls=calls)
    calls[0]["function"]["arguments"] = '{"path": "a", "extra": 1}'
    (action,) = parse_actions("<finish>x</finish>", tool_calls=calls)
    assert action.params == {"path": "a"}
    assert any("extra" in w for w in action.warnings)


def test_native_unknown_and_nameless() -> None:
    with pytest.raises(FormatError, match="Unknown action `send_email`"):
        parse_actions("", tool_calls=[{"function": {"name": "send_email", "arguments": "{}"}}])
    with pytest.raises(FormatError, match="no function name"):
        parse_actions("", tool_calls=[{"function": {"arguments": "{}"}}])


def test_json_non_string_values_become_json_text() -> None:
    (action,) = parse_actions(
        '{"name": "write_code", "arguments": {"path": "p.json", "content": {"a": 1}}}'
    )
    assert action.params["content"] == '{\n  "a": 1\n}'


def test_messages_teach_the_format() -> None:
    with pytest.raises(FormatError) as info:
        parse_actions("just talk")
    message = str(info.value)
    for spec in ACTIONS.values():
        assert spec.name in message
        assert spec.example in message


def test_truncated_is_a_format_error_and_says_what_to_do() -> None:
    with pytest.raises(TruncatedReplyError) as info:
        parse_actions(
            "<write_code><path>big.py</path><content>\nimport os\n", finish_reason="length"
        )
    assert isinstance(info.value, FormatError)
    assert "big.py" in str(info.value)
    assert "smaller parts" in str(info.value)


def test_cut_before_any_action() -> None:
    with pytest.raises(TruncatedReplyError, match="before any complete action"):
        parse_actions("<terminal_run>npm run bu", finish_reason="length")


def test_mention_is_not_an_action() -> None:
    with pytest.raises(FormatError, match=r"Found <finish> without any parameters"):
        parse_actions("I'll use <finish> when done.")


def test_warning_for_unclosed_body_before_action_close() -> None:
    (action,) = parse_actions("<write_code><path>a</path><content>\nx\n</write_code>")
    assert action.params == {"path": "a", "content": "x\n"}
    assert action.warnings


def test_big_reply_parses() -> None:
    body = "    if a < b and c > d:\n        x = '</content>'\n" * 3000
    text = f"<write_code>\n<path>big.py</path>\n<content>\n{body}</content>\n</write_code>"
    (action,) = parse_actions(text)
    assert action.params["content"] == body


def test_native_arguments_cut_off() -> None:
    calls = [{"function": {"name": "write_code", "arguments": '{"path": "a.py", "content": "imp'}}]
    with pytest.raises(TruncatedReplyError, match="smaller parts"):
        parse_actions("", finish_reason="length", tool_calls=calls)


def test_reply_over_the_size_cap_is_a_format_error() -> None:
    """A 5 MB reply of `<write_code>` openers took ~10 s on the event loop before."""
    from backend.actions.model import MAX_REPLY_CHARS

    text = "<write_code>" * (5_000_000 // 12)
    with pytest.raises(FormatError) as info:
        parse_actions(text)
    assert f"{MAX_REPLY_CHARS:,}" in str(info.value)
    assert "too large" in info.value.user
    assert extract_thinking(text) == []


def test_nested_json_is_a_format_error_not_a_recursion_error() -> None:
    """9 KB of nested `{"name": ` ended the run as "Internal error: RecursionError"."""
    with pytest.raises(FormatError, match="contains no action") as info:
        parse_actions('{"name": ' * 1000)
    assert info.value.__cause__ is None
    # and the rest of such a reply is still read
    (action,) = parse_actions('[{"name": ' * 1000 + "\n<finish><message>ok</message></finish>")
    assert action.params == {"message": "ok"}


def test_lone_surrogate_is_a_format_error_and_pairs_are_joined() -> None:
    """A reply holding the escape \\ud800 ended the run with UnicodeEncodeError before."""
    for text in (
        "<write_code><path>a.txt</path><content>x\ud800</content></write_code>",
        '{"name": "terminal_run", "arguments": {"command": "echo \\udfff"}}',
        "<read_file><path>a\udc00.txt</path></read_file>",
    ):
        with pytest.raises(FormatError, match="invalid character") as info:
            parse_actions(text)
        assert "surrogate" in info.value.user
    (action,) = parse_actions(
        "<write_code><path>a.txt</path><content>\ud83d\ude00 ok</content></write_code>"
    )
    assert action.params["content"] == "\U0001f600 ok"
    assert action.params["content"].encode("utf-8") == "\U0001f600 ok".encode()


def test_format_errors_carry_a_short_text_for_people() -> None:
    cases = {
        "just talk": "held no action",
        "<think>never closed": "never closed its reasoning",
        "<frobnicate_it><x>1</x></frobnicate_it><function=zap></function>": "unknown action",
        "<write_code><path>a</path></write_code>": "missing content",
    }
    for text, words in cases.items():
        with pytest.raises(FormatError) as info:
            parse_actions(text)
        assert words in info.value.user
        assert "Allowed actions" not in info.value.user
        assert len(info.value.user) < 120


def test_edit_file_is_in_the_table_and_taught() -> None:
    spec = ACTIONS["edit_file"]
    assert spec.required == ("path", "old_str", "new_str")
    with pytest.raises(FormatError) as info:
        parse_actions("nothing")
    assert spec.example in str(info.value)
    (action,) = parse_actions(spec.example)
    assert action.params == {
        "path": "src/app.py",
        "old_str": "print('hi')",
        "new_str": "print('hello')",
    }


def test_complete_native_calls_in_a_cut_reply_do_not_run() -> None:
    calls = [{"function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]
    assert parse_actions("", finish_reason="stop", tool_calls=calls)[0].type == "read_file"
    with pytest.raises(TruncatedReplyError, match="after `read_file`, so nothing"):
        parse_actions("", finish_reason="length", tool_calls=calls)


def test_an_alias_without_an_underscore_is_read_as_a_tag_too() -> None:
    want = [Action("terminal_run", {"command": "ls -la"})]
    assert parse_actions("<bash><command>ls -la</command></bash>") == want
    assert parse_actions("<bash>ls -la</bash>") == want
    assert parse_actions("<shell><command>ls -la</command></shell>") == want
    # a mention in prose (no parameters, no closer) is still not an action
    with pytest.raises(FormatError):
        parse_actions("I would use <bash> for that.")
