"""Whatever the model sends, the parser answers with actions or a FormatError."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.actions import FormatError, builtin_registry, extract_thinking, parse_actions

PIECES = [
    "<write_code>",
    "</write_code>",
    "<terminal_run>",
    "</terminal_run>",
    "<finish>",
    "</finish>",
    "<read_file path='a'/>",
    "<path>",
    "</path>",
    "<content>",
    "</content>",
    "<command>",
    "</command>",
    "<message>",
    "</message>",
    "<function=write_code>",
    "<function=nope>",
    "</function>",
    "<parameter=path>",
    "<parameter=content>",
    "</parameter>",
    '<invoke name="read_file">',
    "</invoke>",
    '<parameter name="path">',
    "<tool_call>",
    "</tool_call>",
    "<arg_key>path</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<think>",
    "</think>",
    "<![CDATA[",
    "]]>",
    "<!--",
    "-->",
    "```",
    "```xml\n",
    "`",
    "~~~",
    '{"name": "read_file", "arguments": {"path": "x"}}',
    '{"name": "write_code", "arguments": "{bad"}',
    '[{"name": ',
    "&amp;",
    "&lt;",
    "&#xZZ;",
    "&#99999999;",
    "a.py",
    "<edit_file>",
    "</edit_file>",
    "<old_str>",
    "</old_str>",
    "<new_str>",
    "<parameter name=path>",
    '<param name="content">',
    "</param>",
    "<|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>",
    "<\uff5ctool\u2581call\u2581begin\uff5c>read_file<\uff5ctool\u2581sep\uff5c>",
    "[TOOL_CALLS]read_file[ARGS]",
    "<|channel|>commentary to=functions.read_file<|message|>",
    "<|channel|>analysis<|message|>",
    "<|start|>assistant<|channel|>analysis to=functions.read_file<|message|>",
    "<|start|>assistant<|channel|>final<|message|>",
    "<|end|>",
    "<|call|>",
    "<|tool_call_begin|>\nfunctions.read_file:0\n<|tool_call_argument_begin|>\n",
    "<\uff5ctool\u2581call\u2581begin\uff5c>\nread_file\n<\uff5ctool\u2581sep\uff5c>\n",
    "<reasoning>",
    "</reasoning>",
    "[THINK]",
    "[/THINK]",
    "\u25c1think\u25b7",
    "\u25c1/think\u25b7",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
    '{"path": "x"}',
    '<\uff5cDSML\uff5cinvoke name="read_file">',
    '<\uff5cDSML\uff5cparameter name="path" string="true">',
    "</\uff5cDSML\uff5cparameter>",
    "</\uff5cDSML\uff5cinvoke>",
    "<invoke>\n<tool_name>read_file</tool_name>\n<parameters>",
    "</parameters>",
    "<parameter=path\n",
    "<parameter=content=",
    "  <content>\n    ",
    "\n  ",
    "<web_search><query>",
    "</query>",
    "\ud800",
    "&#xD800;",
    "\n",
    "  ",
    "x",
]

reply_st = st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=30).map("".join)


@settings(max_examples=500, deadline=None)
@given(reply_st, st.sampled_from([None, "stop", "length"]))
def test_never_crashes(text: str, finish_reason: str | None) -> None:
    try:
        actions = parse_actions(text, finish_reason=finish_reason)
    except FormatError as exc:
        assert str(exc)
        assert exc.user
        # the parser turns a bug of its own into a FormatError too, chained: none here
        assert exc.__cause__ is None
    else:
        assert actions
        for action in actions:
            assert all(isinstance(v, str) for v in action.params.values())
            spec = builtin_registry().vocabulary.known[action.type]
            assert set(spec.required) <= set(action.params)
    assert all(isinstance(t, str) for t in extract_thinking(text))


HOSTILE = [
    "<write_code " * 3000,
    '{"a' * 10000,
    "</think>" * 4000,
    "<think>" * 4000,
    "<finish> " * 4000,
    "<write_code><path>a</path><content>" + "</content>\n" * 3000,
    "<function=write_code>" + "<parameter=content>\n" * 2000,
    "` x " * 8000,
    "`a" * 50000,
    "<!--" * 20000,
    '{"name": ' * 3000,
    "[" * 50000,
    "<write_code>" * 10000,
    "<think>\n" + "<write_code>\n" * 5000,
    "<|tool_call_begin|>" * 5000,
    "[TOOL_CALLS]a[ARGS]" * 3000,
    "<|channel|>analysis<|message|>" * 5000,
    "<|channel|>analysis<|message|>x<|end|>" * 3000,
    "<|start|>assistant" + "a" * 150 * 400,
    "<|start|>" * 8000,
    "<|tool_call_begin|>\n" * 5000,
    "<|tool_call_begin|>" + " " * 50000,
    "[THINK]" * 6000,
    "[/THINK]" * 6000,
    "\u25c1think\u25b7" * 5000,
    "<reasoning>\n" + "<write_code>\n" * 5000,
]


def test_hostile_inputs_finish() -> None:
    """Floods of half-tags come back (no quadratic blow-up); bench prints the times."""
    for text in HOSTILE:
        try:
            parse_actions(text)
        except FormatError as exc:
            assert exc.__cause__ is None, text[:40]
