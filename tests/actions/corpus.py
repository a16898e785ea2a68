"""Realistic model replies and what the parser must make of them.

Each case notes which model habit or failure it imitates. `expect` is either the exact
list of (type, params) or Err(substring of the message for the model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Err:
    contains: str
    truncated: bool = False


Expected = list[tuple[str, dict[str, str]]] | Err


@dataclass(frozen=True)
class Case:
    name: str
    note: str
    text: str
    expect: Expected
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    warnings: tuple[str, ...] = field(default=())  # substrings expected among warnings


def W(path: str, content: str) -> tuple[str, dict[str, str]]:
    return ("write_code", {"path": path, "content": content})


def T(command: str, cwd: str | None = None) -> tuple[str, dict[str, str]]:
    params = {"command": command}
    if cwd is not None:
        params["cwd"] = cwd
    return ("terminal_run", params)


def R(path: str) -> tuple[str, dict[str, str]]:
    return ("read_file", {"path": path})


def F(message: str) -> tuple[str, dict[str, str]]:
    return ("finish", {"message": message})


def E(path: str, old: str, new: str) -> tuple[str, dict[str, str]]:
    return ("edit_file", {"path": path, "old_str": old, "new_str": new})


DS = "\uff5c"  # DeepSeek's fullwidth bar; "\u2581" stands for the underscores
DS_BEGIN = f"<{DS}tool\u2581call\u2581begin{DS}>"
DS_SEP = f"<{DS}tool\u2581sep{DS}>"
DS_END = f"<{DS}tool\u2581call\u2581end{DS}>"
DS_ALL_BEGIN = f"<{DS}tool\u2581calls\u2581begin{DS}>"
DS_ALL_END = f"<{DS}tool\u2581calls\u2581end{DS}>"


def S(query: str) -> tuple[str, dict[str, str]]:
    return ("web_search", {"query": query})


def U(url: str) -> tuple[str, dict[str, str]]:
    return ("web_fetch", {"url": url})


def M(name: str, arguments: str) -> tuple[str, dict[str, str]]:
    return ("mcp_tool", {"name": name, "arguments": arguments})


def A(question: str) -> tuple[str, dict[str, str]]:
    return ("ask_user", {"question": question})


DSML = f"{DS}DSML{DS}"  # DeepSeek V3.2's tag prefix (U+FF5C bars): <|DSML|invoke …>


ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Example</title>
  <entry>
    <title>First</title>
    <content type="html">&lt;p&gt;Hello &amp; welcome&lt;/p&gt;</content>
  </entry>
</feed>
"""

FIXTURE_TEST = """from backend.actions import parse_actions


def test_closing_tag_in_content():
    reply = "<write_code><path>a</path><content>x</content></write_code>"
    assert parse_actions(reply)[0].params["content"] == "x"


TAIL = "</content>\\n</write_code>\\n"
"""

PROTOCOL_DOC = """# Protocol

Write a file like this:

<write_code>
<path>src/app.py</path>
<content>
print('hi')
</content>
</write_code>

Run a command:

<write_code>
<path>b.txt</path>
<content>
b
</content>
</write_code>

That is all.
"""

PARSER_SRC = """def body(text):
    start = text.find("<content>") + len("<content>")
    end = text.find("</content>", start)
    return text[start:end]
"""

CASES: list[Case] = [
    # ------------------------------------------------------------ canonical
    Case(
        "canonical-basic",
        "the format the prompt asks for",
        "<write_code>\n<path>src/app.py</path>\n<content>\nprint('hi')\n</content>\n</write_code>",
        [W("src/app.py", "print('hi')\n")],
    ),
    Case(
        "canonical-one-line",
        "small models put everything on one line",
        "<write_code><path>a.txt</path><content>hello</content></write_code>",
        [W("a.txt", "hello")],
    ),
    Case(
        "canonical-prose-around",
        "GPT-4o style: explanation, action, closing remark",
        "I'll create the script now.\n\n<write_code>\n<path>hello.py</path>\n<content>\n"
        "print('hello')\n</content>\n</write_code>\n\nThis prints a greeting.",
        [W("hello.py", "print('hello')\n")],
    ),
    Case(
        "canonical-indented-close",
        "model indents the closing tag inside the action",
        "<write_code>\n  <path>a.py</path>\n  <content>\nx = 1\n  </content>\n</write_code>",
        [W("a.py", "x = 1\n")],
    ),
    Case(
        "content-lt-gt-amp",
        "raw comparison and shell operators in code (lxml recover=True corrupted these)",
        "<write_code><path>a.py</path><content>\nif a < b and c>d:\n    x = a & b\n"
        "</content></write_code>",
        [W("a.py", "if a < b and c>d:\n    x = a & b\n")],
    ),
    Case(
        "command-redirects",
        "shell redirections in a command",
        "<terminal_run><command>python3 app.py 2>&1 && cat < out.txt</command></terminal_run>",
        [T("python3 app.py 2>&1 && cat < out.txt")],
    ),
    Case(
        "terminal-cwd",
        "optional param given",
        "<terminal_run>\n<command>npm test</command>\n<cwd>web</cwd>\n</terminal_run>",
        [T("npm test", "web")],
    ),
    Case(
        "read-file",
        "read before editing",
        "Let me look first.\n<read_file><path>src/app.py</path></read_file>",
        [R("src/app.py")],
    ),
    Case(
        "finish",
        "task done",
        "<finish><message>Created app.py and ran it: it prints 42.</message></finish>",
        [F("Created app.py and ran it: it prints 42.")],
    ),
    Case(
        "null-stays-text",
        "values are never type-converted",
        "<write_code><path>v.txt</path><content>null</content></write_code>",
        [W("v.txt", "null")],
    ),
    Case(
        "crlf-content",
        "Windows line endings kept byte-exact",
        "<write_code><path>w.bat</path><content>\r\n@echo off\r\necho hi\r\n</content>"
        "</write_code>",
        [W("w.bat", "@echo off\r\necho hi\r\n")],
    ),
    Case(
        "no-final-newline",
        "closing tag right after the last line",
        "<write_code><path>a.txt</path><content>\nline</content></write_code>",
        [W("a.txt", "line")],
    ),
    Case(
        "empty-content",
        "an empty file is allowed",
        "<write_code><path>pkg/__init__.py</path><content></content></write_code>",
        [W("pkg/__init__.py", "")],
    ),
    Case(
        "leading-spaces-kept",
        "only one leading newline is dropped, indentation is content",
        "<write_code><path>a.py</path><content>\n\n    x = 1\n</content></write_code>",
        [W("a.py", "\n    x = 1\n")],
    ),
    # ------------------------------------------------------------ tricky content
    Case(
        "content-with-closing-tag-in-string",
        "a test fixture quoting the protocol: `</content></write_code>` inside the file",
        "<write_code>\n<path>tests/test_fixture.py</path>\n<content>\n"
        + FIXTURE_TEST
        + "</content>\n</write_code>",
        [W("tests/test_fixture.py", FIXTURE_TEST)],
    ),
    Case(
        "content-atom-feed",
        "an Atom feed has its own <content> elements",
        "<write_code>\n<path>feed.xml</path>\n<content>\n" + ATOM + "</content>\n</write_code>",
        [W("feed.xml", ATOM)],
    ),
    Case(
        "content-protocol-doc",
        "docs about this protocol: whole actions with <path> inside the content",
        "<write_code>\n<path>docs/protocol.md</path>\n<content>\n"
        + PROTOCOL_DOC
        + "</content>\n</write_code>\n<finish><message>docs</message></finish>",
        [W("docs/protocol.md", PROTOCOL_DOC), F("docs")],
    ),
    Case(
        "content-parser-source",
        "source code searching for the closing tag (unbalanced `</content>` in a string)",
        "<write_code><path>p.py</path><content>\n"
        + PARSER_SRC
        + "</content></write_code>\n<terminal_run><command>python3 p.py</command></terminal_run>",
        [W("p.py", PARSER_SRC), T("python3 p.py")],
    ),
    Case(
        "content-with-fence-and-think",
        "a README holding code fences and a <think> example",
        "<write_code><path>README.md</path><content>\n# Demo\n\n```python\nprint(1)\n```\n\n"
        "Models emit <think>…</think> first.\n</content></write_code>",
        [
            W(
                "README.md",
                "# Demo\n\n```python\nprint(1)\n```\n\nModels emit <think>…</think> first.\n",
            )
        ],
    ),
    Case(
        "content-cdata",
        "Claude-style CDATA wrapping",
        "<write_code><path>a.html</path><content><![CDATA[<p>a & b</p>\n]]></content></write_code>",
        [W("a.html", "<p>a & b</p>\n")],
    ),
    Case(
        "content-cdata-split-idiom",
        "CDATA holding `]]>` via the split idiom",
        "<write_code><path>x.xml</path><content>\n<![CDATA[<a>]]]]><![CDATA[></a>\n]]>\n"
        "</content></write_code>",
        [W("x.xml", "<a>]]></a>\n")],
    ),
    Case(
        "content-cdata-not-decoded",
        "entities inside CDATA are text",
        "<write_code><path>e.txt</path><content><![CDATA[&lt;b&gt;]]></content></write_code>",
        [W("e.txt", "&lt;b&gt;")],
    ),
    Case(
        "content-escaped-consistently",
        "model XML-escaped the whole file (older GPT habit): decoded once",
        "<write_code><path>c.py</path><content>\nif a &lt; b &amp;&amp; c:\n    pass\n"
        "</content></write_code>",
        [W("c.py", "if a < b && c:\n    pass\n")],
    ),
    Case(
        "content-mixed-entities-kept",
        "HTML with raw tags and &amp; is not decoded",
        "<write_code><path>i.html</path><content>\n<p>Tom &amp; Jerry</p>\n</content></write_code>",
        [W("i.html", "<p>Tom &amp; Jerry</p>\n")],
    ),
    Case(
        "content-double-escaped-once",
        "decoded once only: &amp;lt; becomes &lt;",
        "<write_code><path>d.txt</path><content>a &amp;lt; b</content></write_code>",
        [W("d.txt", "a &lt; b")],
    ),
    Case(
        "content-bare-ampersand",
        "a bare & means the text is not escaped",
        "<write_code><path>s.sh</path><content>\necho a && echo &lt;\n</content></write_code>",
        [W("s.sh", "echo a && echo &lt;\n")],
    ),
    Case(
        "path-not-replaced-by-content",
        "a <path> inside the content must not replace the real path",
        "<write_code><path>real.md</path><content>\nUse <path>fake.md</path> and </content> "
        "then more.\n</content></write_code>",
        [W("real.md", "Use <path>fake.md</path> and </content> then more.\n")],
    ),
    Case(
        "content-closer-then-path",
        "content holds `</content>` followed by a `<path>` line: neither ends it nor moves it",
        "<write_code>\n<path>real.txt</path>\n<content>\nline\n</content>\n<path>evil.txt</path>"
        "\nmore\n</content>\n</write_code>",
        [W("real.txt", "line\n</content>\n<path>evil.txt</path>\nmore\n")],
    ),
    Case(
        "content-closer-pair-then-prose",
        "docs line showing how an action ends, then more text: the last closer wins",
        "<write_code><path>a.md</path><content>\nEnd it with\n</content>\n</write_code>\n"
        "and you are done.\n</content>\n</write_code>\n",
        [W("a.md", "End it with\n</content>\n</write_code>\nand you are done.\n")],
    ),
    Case(
        "qwen-content-with-parameter-closer",
        "Qwen writing a file that quotes `</parameter>`",
        "<function=write_code>\n<parameter=path>p.py</parameter>\n<parameter=content>\n"
        'END = "</parameter>"\n</parameter>\n</function>',
        [W("p.py", 'END = "</parameter>"\n')],
    ),
    Case(
        "cdata-shebang",
        "CDATA opened on its own line: the newline after it is dropped",
        "<write_code><path>run.sh</path><content><![CDATA[\n#!/bin/sh\necho ok\n]]></content>"
        "</write_code>",
        [W("run.sh", "#!/bin/sh\necho ok\n")],
    ),
    Case(
        "content-doctype",
        "a DOCTYPE with an entity declaration is just text (no entity resolution)",
        '<write_code><path>x.xml</path><content>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
        "\n<x>&e;</x>\n</content></write_code>",
        [W("x.xml", '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n<x>&e;</x>\n')],
    ),
    # ------------------------------------------------------------ attributes
    Case(
        "attr-body",
        "path as attribute, body is the content",
        '<write_code path="a.py">\nimport os\n</write_code>',
        [W("a.py", "import os\n")],
    ),
    Case(
        "attr-selfclosing",
        "self-closing read",
        '<read_file path="src/x.py"/>',
        [R("src/x.py")],
    ),
    Case(
        "body-command",
        "command as the tag body",
        "<terminal_run>ls -la</terminal_run>",
        [T("ls -la")],
    ),
    Case(
        "body-finish",
        "finish message as the tag body",
        "All done.\n<finish>Wrote the app.</finish>",
        [F("Wrote the app.")],
    ),
    # ------------------------------------------------------------ Qwen
    Case(
        "qwen-coder",
        "Qwen3-Coder native format inside <tool_call>",
        "<tool_call>\n<function=write_code>\n<parameter=path>\nsrc/a.py\n</parameter>\n"
        "<parameter=content>\nprint(1)\n</parameter>\n</function>\n</tool_call>",
        [W("src/a.py", "print(1)\n")],
    ),
    Case(
        "qwen-missing-parameter-close",
        "Qwen3-Coder drops the last </parameter>",
        "<tool_call>\n<function=terminal_run>\n<parameter=command>\npytest -q\n</function>\n"
        "</tool_call>",
        [T("pytest -q\n")],
    ),
    Case(
        "qwen-two-calls",
        "two Qwen calls in one reply, same type",
        "<function=write_code><parameter=path>a</parameter><parameter=content>A</parameter>"
        "</function>\n<function=write_code><parameter=path>b</parameter>"
        "<parameter=content>B</parameter></function>",
        [W("a", "A"), W("b", "B")],
    ),
    Case(
        "qwen-unknown-function",
        "Qwen calls a tool we do not have",
        "<tool_call><function=generate_image><parameter=prompt>x</parameter></function>"
        "</tool_call>",
        Err("Unknown action `generate_image`"),
    ),
    Case(
        "qwen-alias-function",
        "Qwen uses another agent's tool name",
        "<function=run_command><parameter=cmd>ls</parameter></function>",
        [T("ls")],
    ),
    Case(
        "glm-arg-key-value",
        "GLM-4.5 <tool_call>NAME with <arg_key>/<arg_value> pairs",
        "<tool_call>write_code\n<arg_key>path</arg_key>\n<arg_value>app.py</arg_value>\n"
        "<arg_key>content</arg_key>\n<arg_value>if a < b:\n    pass\n</arg_value>\n</tool_call>",
        [W("app.py", "if a < b:\n    pass\n")],
    ),
    # ------------------------------------------------------------ wrappers
    Case(
        "minimax-namespaced",
        "MiniMax-M2 namespaced wrapper with invoke/parameter",
        '<minimax:tool_call>\n<invoke name="read_file">\n<parameter name="path">a.txt</parameter>'
        "\n</invoke>\n</minimax:tool_call>",
        [R("a.txt")],
    ),
    Case(
        "function-calls-invoke",
        "Anthropic-style <function_calls><invoke>",
        '<function_calls>\n<invoke name="terminal_run">\n<parameter name="command">echo hi'
        '</parameter>\n<parameter name="cwd">.</parameter>\n</invoke>\n</function_calls>',
        [T("echo hi", ".")],
    ),
    Case(
        "actions-wrapper",
        "model wraps several actions in <actions>",
        "<actions>\n<write_code><path>a</path><content>1</content></write_code>\n"
        "<terminal_run><command>cat a</command></terminal_run>\n</actions>",
        [W("a", "1"), T("cat a")],
    ),
    # ------------------------------------------------------------ JSON
    Case(
        "json-hermes",
        "Hermes/Qwen2.5 JSON inside <tool_call>",
        '<tool_call>\n{"name": "write_code", "arguments": {"path": "a.py", "content": '
        '"print(1)\\n"}}\n</tool_call>',
        [W("a.py", "print(1)\n")],
    ),
    Case(
        "json-bare-parameters",
        "Llama-3 style bare JSON with `parameters`",
        '{"name": "terminal_run", "parameters": {"command": "ls"}}',
        [T("ls")],
    ),
    Case(
        "json-fenced",
        "JSON tool call in a ```json fence, the only action",
        'Running it:\n```json\n{"name": "read_file", "arguments": {"file_path": "x.txt"}}\n```',
        [R("x.txt")],
    ),
    Case(
        "json-string-arguments",
        "arguments as a JSON string, OpenAI-style",
        '{"name": "finish", "arguments": "{\\"message\\": \\"ok\\"}"}',
        [F("ok")],
    ),
    Case(
        "json-null-optional",
        "`cwd: null` means not given",
        '{"name": "terminal_run", "arguments": {"command": "ls", "cwd": null}}',
        [T("ls")],
    ),
    Case(
        "json-raw-newlines",
        "model put raw newlines inside the JSON string",
        '{"name": "write_code", "arguments": {"path": "a", "content": "x\ny\n"}}',
        [W("a", "x\ny\n")],
    ),
    Case(
        "json-list",
        "a JSON list of calls",
        '[{"name": "read_file", "arguments": {"path": "a"}}, '
        '{"name": "read_file", "arguments": {"path": "b"}}]',
        [R("a"), R("b")],
    ),
    Case(
        "json-mistral-prefix",
        "Mistral `[TOOL_CALLS]` prefix before a JSON list",
        '[TOOL_CALLS][{"name": "terminal_run", "arguments": {"command": "ls -1"}}]',
        [T("ls -1")],
    ),
    Case(
        "json-llama-python-tag",
        "Llama 3.1 `<|python_tag|>` before the JSON call",
        '<|python_tag|>{"name": "read_file", "parameters": {"path": "setup.py"}}',
        [R("setup.py")],
    ),
    Case(
        "json-openai-function-object",
        "a pasted OpenAI tool-call object",
        '{"type": "function", "function": {"name": "finish", '
        '"arguments": "{\\"message\\": \\"ok\\"}"}}',
        [F("ok")],
    ),
    Case(
        "json-unknown-tool",
        "JSON call to a tool we do not have",
        '{"name": "send_email", "arguments": {"to": "x@example.org"}}',
        Err("Unknown action `send_email`"),
    ),
    Case(
        "json-in-prose-not-a-call",
        "JSON data in prose is not an action",
        'The config is {"name": "demo"} — <finish><message>ok</message></finish>',
        [F("ok")],
    ),
    # ------------------------------------------------------------ native
    Case(
        "native-tool-calls",
        "provider returned OpenAI tool_calls; text is only commentary",
        "I'll run the tests.",
        [T("pytest")],
        tool_calls=[
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "terminal_run", "arguments": '{"command": "pytest"}'},
            }
        ],
    ),
    Case(
        "native-dict-arguments",
        "arguments already decoded",
        "",
        [W("a", "1")],
        tool_calls=[
            {
                "id": "c",
                "type": "function",
                "function": {"name": "write_code", "arguments": {"path": "a", "content": "1"}},
            }
        ],
    ),
    Case(
        "native-bad-json",
        "truncated JSON arguments from the provider",
        "",
        Err("could not be read"),
        tool_calls=[
            {
                "id": "c",
                "type": "function",
                "function": {"name": "write_code", "arguments": '{"path": "a'},
            }
        ],
    ),
    # ------------------------------------------------------------ reasoning
    Case(
        "think-then-act",
        "DeepSeek-R1/Qwen3 with a <think> block",
        "<think>\nI should list files.\n</think>\n"
        "<terminal_run><command>ls</command></terminal_run>",
        [T("ls")],
    ),
    Case(
        "think-draft-not-run",
        "a draft action inside reasoning never runs",
        "<think>maybe <write_code><path>bad</path><content>x</content></write_code>? no.</think>"
        "<write_code><path>good</path><content>y</content></write_code>",
        [W("good", "y")],
    ),
    Case(
        "think-stray-close",
        "chat template opened <think> in the prompt: only the closer is in the reply",
        "Let me draft: <finish><message>draft</message></finish>\nNo, test first.\n</think>\n\n"
        "<terminal_run><command>pytest</command></terminal_run>",
        [T("pytest")],
    ),
    Case(
        "thinking-tag",
        "Claude-style <thinking>",
        "<thinking>read it first</thinking>\n<read_file><path>a</path></read_file>",
        [R("a")],
    ),
    Case(
        "think-unclosed",
        "reasoning never closed: nothing runs",
        "<think>I will write <write_code><path>a</path><content>x</content></write_code>",
        Err("never closed its <think>"),
    ),
    Case(
        "think-unclosed-cut",
        "reasoning cut off by the length limit",
        "<think>long long reasoning",
        Err("cut off inside its <think>", truncated=True),
        finish_reason="length",
    ),
    # ------------------------------------------------------------ fences and mentions
    Case(
        "fenced-only-action",
        "whole action in an ```xml fence: runs, since it is the only one",
        "```xml\n<write_code>\n<path>a.py</path>\n<content>\nx = 1\n</content>\n</write_code>\n```",
        [W("a.py", "x = 1\n")],
    ),
    Case(
        "fenced-example-beside-real",
        "a fenced example next to the real action does not run",
        "The format is:\n```xml\n<finish><message>example</message></finish>\n```\n"
        "<terminal_run><command>make</command></terminal_run>",
        [T("make")],
    ),
    Case(
        "inline-mention",
        "inline code mentions are not actions",
        "I'll call `<finish>` when done; first `<read_file>`:\n"
        "<read_file><path>a</path></read_file>",
        [R("a")],
    ),
    Case(
        "prose-mention-unclosed",
        "a bare <finish> mention in prose, then the real action",
        "When everything passes I will use <finish> to end.\n<terminal_run><command>pytest"
        "</command></terminal_run>",
        [T("pytest")],
    ),
    Case(
        "prose-mention-same-name-later",
        "a bare mention followed by the same action for real",
        "I will use <finish> now.\n<finish><message>done</message></finish>",
        [F("done")],
    ),
    Case(
        "html-comment",
        "a commented-out action does not run",
        "<!-- <terminal_run><command>rm -rf /</command></terminal_run> -->\n"
        "<read_file><path>a</path></read_file>",
        [R("a")],
    ),
    Case(
        "fenced-content-inside-fenced-action",
        "fenced action whose content holds a fence",
        "````xml\n<write_code><path>R.md</path><content>\n```sh\nls\n```\n</content></write_code>\n````",
        [W("R.md", "```sh\nls\n```\n")],
    ),
    # ------------------------------------------------------------ several actions
    Case(
        "several-in-order",
        "write, run, finish in one reply",
        "<write_code><path>a.py</path><content>print(2)</content></write_code>\n"
        "<terminal_run><command>python3 a.py</command></terminal_run>\n"
        "<finish><message>printed 2</message></finish>",
        [W("a.py", "print(2)"), T("python3 a.py"), F("printed 2")],
    ),
    Case(
        "same-type-not-merged",
        "two write_code in a row stay two",
        "<write_code><path>a</path><content>\nA\n</content></write_code>\nand\n"
        "<write_code><path>b</path><content>\nB\n</content></write_code>",
        [W("a", "A\n"), W("b", "B\n")],
    ),
    Case(
        "missing-action-close-stop-seq",
        "stop sequence ate the final </write_code>",
        "<write_code><path>a</path><content>\nA\n</content>",
        [W("a", "A\n")],
    ),
    Case(
        "missing-action-close-between",
        "first action lacks its close tag, the next one follows",
        "<write_code><path>a</path><content>A</content>\n"
        "<terminal_run><command>cat a</command></terminal_run>",
        [W("a", "A"), T("cat a")],
    ),
    Case(
        "content-before-path",
        "params in another order",
        "<write_code><content>\nz\n</content><path>z.txt</path></write_code>",
        [W("z.txt", "z\n")],
    ),
    # ------------------------------------------------------------ truncation
    Case(
        "truncated-length",
        "hit max_tokens inside a big file",
        "<write_code><path>big.py</path><content>\ndef f():\n    return 1\n\ndef g(",
        Err("smaller parts", truncated=True),
        finish_reason="length",
    ),
    Case(
        "truncated-no-finish-reason",
        "cut off, provider did not say so",
        "<write_code><path>big.py</path><content>\nimport os\n",
        Err("smaller parts", truncated=True),
    ),
    Case(
        "truncated-qwen",
        "Qwen cut off inside a parameter",
        "<tool_call>\n<function=write_code>\n<parameter=path>a.py</parameter>\n"
        "<parameter=content>\nimport sys\n",
        Err("smaller parts", truncated=True),
        finish_reason="length",
    ),
    Case(
        "truncated-attr-body",
        "path as attribute, body cut off with no finish_reason",
        '<write_code path="a.py">\nimport os\ndef main(',
        Err("smaller parts", truncated=True),
    ),
    Case(
        "truncated-after-path",
        "cut right after the path",
        "<write_code>\n<path>a.py</path>\n",
        Err("smaller parts", truncated=True),
        finish_reason="length",
    ),
    Case(
        "truncated-max-tokens",
        "Anthropic-style finish reason",
        "<terminal_run><command>echo start &&",
        Err("smaller parts", truncated=True),
        finish_reason="max_tokens",
    ),
    Case(
        "length-but-complete",
        "length limit hit in trailing prose after a complete action: nothing runs",
        "<read_file><path>a</path></read_file>\nNext I will",
        Err("cut off (it hit the output length limit) after `read_file`", truncated=True),
        finish_reason="length",
    ),
    Case(
        "length-after-several-complete",
        "a reply the limit cut after complete actions is truncated: none of them runs",
        "<write_code><path>a.py</path><content>print(1)</content></write_code>\n"
        "<terminal_run><command>python3 a.py</command></terminal_run>\nNow I",
        Err("after `write_code`, `terminal_run`, so nothing from it was run", truncated=True),
        finish_reason="length",
    ),
    # ------------------------------------------------------------ validation
    Case(
        "no-action",
        "model only talks",
        "Sure! I can help with that. What language would you like?",
        Err("contains no action"),
    ),
    Case(
        "missing-required",
        "write_code without content",
        "<write_code><path>a.py</path></write_code>",
        Err("missing required parameter(s): content"),
    ),
    Case(
        "empty-path",
        "empty path",
        "<write_code><path> </path><content>x</content></write_code>",
        Err("empty `path`"),
    ),
    Case(
        "empty-command",
        "empty command",
        "<terminal_run><command></command></terminal_run>",
        Err("empty `command`"),
    ),
    Case(
        "duplicate-param",
        "path given twice (alias and canonical)",
        "<write_code><path>a</path><file_path>b</file_path><content>x</content></write_code>",
        Err("more than once"),
    ),
    Case(
        "unknown-param-dropped",
        "extra param is dropped with a warning",
        "<read_file><path>a</path><encoding>utf-8</encoding></read_file>",
        [R("a")],
        warnings=("unknown parameter `encoding`",),
    ),
    Case(
        "aliases",
        "file_path / code / cmd / working_dir aliases",
        "<write_code><file_path>a.py</file_path><code>x</code></write_code>"
        "<terminal_run><cmd>ls</cmd><working_dir>src</working_dir></terminal_run>",
        [W("a.py", "x"), T("ls", "src")],
    ),
    Case(
        "alias-action-tag",
        "Cline-style write_file / attempt_completion tags",
        "<write_file><path>a</path><content>1</content></write_file>\n"
        "<attempt_completion><result>done</result></attempt_completion>",
        [W("a", "1"), F("done")],
    ),
    Case(
        "error-lists-actions",
        "the no-action message lists the allowed actions and their params",
        "Done thinking.",
        Err("write_code(path, content)"),
    ),
    # ------------------------------------------------------------ edit_file
    Case(
        "edit-file-canonical",
        "the exact search-and-replace edit, as the prompt shows it",
        "<edit_file>\n<path>src/app.py</path>\n<old_str>\nprint('hi')\n</old_str>\n"
        "<new_str>\nprint('hello')\n</new_str>\n</edit_file>",
        [E("src/app.py", "print('hi')\n", "print('hello')\n")],
    ),
    Case(
        "edit-file-delete",
        "an empty new_str deletes the text",
        "<edit_file><path>a.py</path><old_str>import os\n</old_str><new_str></new_str></edit_file>",
        [E("a.py", "import os\n", "")],
    ),
    Case(
        "edit-file-byte-exact",
        "old and new text keep raw <, &, quotes and the protocol's own tags",
        "<edit_file><path>t.py</path><old_str>if a < b & c:\n    s = '</old_str>'\n"
        '</old_str><new_str>if a <= b && c:\n    s = "</new_str>"\n</new_str></edit_file>',
        [
            E(
                "t.py",
                "if a < b & c:\n    s = '</old_str>'\n",
                'if a <= b && c:\n    s = "</new_str>"\n',
            )
        ],
    ),
    Case(
        "edit-file-empty-old",
        "an empty old_str matches nothing useful",
        "<edit_file><path>a.py</path><old_str></old_str><new_str>x</new_str></edit_file>",
        Err("empty `old_str`"),
    ),
    Case(
        "edit-file-qwen",
        "Qwen3-Coder calling the edit tool in its own format",
        "<tool_call>\n<function=edit_file>\n<parameter=path>\na.py\n</parameter>\n"
        "<parameter=old_str>\nx = 1\n</parameter>\n<parameter=new_str>\nx = 2\n</parameter>\n"
        "</function>\n</tool_call>",
        [E("a.py", "x = 1\n", "x = 2\n")],
    ),
    Case(
        "edit-file-str-replace-json",
        "Anthropic/OpenHands-style tool and param names (str_replace, old_string/new_string)",
        '{"name": "str_replace", "arguments": {"file_path": "a.py", "old_string": "x = 1", '
        '"new_string": "x = 2"}}',
        [E("a.py", "x = 1", "x = 2")],
    ),
    # ------------------------------------------------------------ real-reply policies
    Case(
        "fence-wraps-whole-py",
        "GPT-4o-mini / Llama wrap the file in a Markdown fence: the fence is not the file",
        "<write_code>\n<path>app.py</path>\n<content>\n```python\nimport sys\n\n"
        "print(sys.argv[1:])\n```\n</content>\n</write_code>",
        [W("app.py", "import sys\n\nprint(sys.argv[1:])\n")],
        warnings=("Markdown fence",),
    ),
    Case(
        "fence-wraps-whole-json-call",
        "the same habit inside a JSON tool call",
        '{"name": "write_code", "arguments": {"path": "run.sh", "content": '
        '"```bash\\n#!/bin/sh\\necho ok\\n```"}}',
        [W("run.sh", "#!/bin/sh\necho ok\n")],
    ),
    Case(
        "fence-kept-in-markdown",
        "a Markdown file may be one code block: its fence is content",
        "<write_code><path>snippet.md</path><content>\n```python\nprint(1)\n```\n"
        "</content></write_code>",
        [W("snippet.md", "```python\nprint(1)\n```\n")],
    ),
    Case(
        "fence-inside-kept",
        "a fence that does not wrap the whole file is content",
        "<write_code><path>gen.py</path><content>\nDOC = '''\n```\nx\n```\n'''\n"
        "</content></write_code>",
        [W("gen.py", "DOC = '''\n```\nx\n```\n'''\n")],
    ),
    Case(
        "dedent-xml-indentation",
        "content pretty-printed with the XML's indentation (Claude, Gemini)",
        "<write_code>\n  <path>pkg/util.py</path>\n  <content>\n  def add(a, b):\n"
        "      return a + b\n\n  class C:\n      pass\n  </content>\n</write_code>",
        [W("pkg/util.py", "def add(a, b):\n    return a + b\n\nclass C:\n    pass\n")],
    ),
    Case(
        "dedent-not-when-some-line-is-less-indented",
        "a line left of the closing tag's indentation: nothing is taken off",
        "<write_code>\n    <path>a.py</path>\n    <content>\n    x = 1\ny = 2\n    </content>\n"
        "</write_code>",
        [W("a.py", "    x = 1\ny = 2\n")],
    ),
    Case(
        "path-in-backticks",
        "a path written as inline code, with spaces around it",
        "<read_file><path> `src/app.py` </path></read_file>\n"
        "<terminal_run><command>ls</command><cwd>`src`</cwd></terminal_run>",
        [R("src/app.py"), T("ls", "src")],
    ),
    Case(
        "path-in-backticks-json",
        "the same in a JSON tool call",
        '{"name": "read_file", "arguments": {"path": " `notes.txt`\\n"}}',
        [R("notes.txt")],
    ),
    Case(
        "qwen35-unclosed-think-final-action",
        "Qwen 3.5 never closes <think> and ends with the real call: that call runs",
        "<think>\nThe user wants the tests run. Maybe <read_file><path>x</path></read_file>"
        " first? No.\n\n<tool_call>\n<function=terminal_run>\n<parameter=command>\npytest -q\n"
        "</parameter>\n</function>\n</tool_call>\n",
        [T("pytest -q\n")],
        warnings=("never closed",),
    ),
    Case(
        "unclosed-think-final-write-byte-exact",
        "the final action after an unclosed <think> keeps its content byte-exact",
        "<think>Write it.\n\n<write_code>\n<path>a.py</path>\n<content>\nif a < b & c:\n"
        "    s = '</content>'\n</content>\n</write_code>\n<finish><message>ok</message></finish>",
        [W("a.py", "if a < b & c:\n    s = '</content>'\n"), F("ok")],
    ),
    Case(
        "unclosed-think-action-then-prose",
        "prose after the action: the action is a draft inside the reasoning, nothing runs",
        "<think>\n<terminal_run><command>rm -rf build</command></terminal_run>\nor maybe not",
        Err("never closed its <think>"),
    ),
    Case(
        "surrogate-escape-json",
        "a JSON string holding the lone escape \\ud800: a format error, never a crash",
        '{"name": "write_code", "arguments": {"path": "a.txt", "content": "x\\ud800y"}}',
        Err("invalid character"),
    ),
    Case(
        "surrogate-entity-xml",
        "an XML character reference to a surrogate",
        "<write_code><path>a.txt</path><content>&#xD800; &amp;</content></write_code>",
        Err("invalid character"),
    ),
    Case(
        "surrogate-pair-escape-json",
        "a valid surrogate pair escape is the emoji it encodes",
        '{"name": "write_code", "arguments": {"path": "e.txt", "content": "\\ud83d\\ude00"}}',
        [W("e.txt", "\U0001f600")],
    ),
    Case(
        "nul-in-command",
        "a NUL character can be in no command or path (and PostgreSQL text cannot hold it)",
        "<terminal_run><command>echo a\x00b</command></terminal_run>",
        Err("NUL character"),
    ),
    Case(
        "nul-in-file-content-kept",
        "file content is written as given, NUL included",
        "<write_code><path>z.bin</path><content>a\x00b</content></write_code>",
        [W("z.bin", "a\x00b")],
    ),
    # ------------------------------------------------------------ vendor markers
    Case(
        "deepseek-v3-markers",
        "DeepSeek V3 chat template: type, separator, name, JSON in a fence",
        f"{DS_ALL_BEGIN}{DS_BEGIN}function{DS_SEP}write_code\n```json\n"
        '{"path": "a.py", "content": "print(1)\\n"}\n```'
        f"{DS_END}{DS_ALL_END}",
        [W("a.py", "print(1)\n")],
    ),
    Case(
        "deepseek-v31-markers",
        "DeepSeek V3.1: name, separator, bare JSON",
        f'{DS_ALL_BEGIN}{DS_BEGIN}terminal_run{DS_SEP}{{"command": "ls -la"}}{DS_END}'
        f'{DS_BEGIN}read_file{DS_SEP}{{"path": "a"}}{DS_END}{DS_ALL_END}',
        [T("ls -la"), R("a")],
    ),
    Case(
        "kimi-k2-markers",
        "Kimi K2: functions.NAME:index, then the argument marker",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0"
        '<|tool_call_argument_begin|>{"path": "setup.py"}<|tool_call_end|>'
        "<|tool_calls_section_end|>",
        [R("setup.py")],
    ),
    Case(
        "gpt-oss-harmony",
        "gpt-oss (harmony): commentary channel addressed to=functions.NAME",
        "<|channel|>analysis<|message|>Need to list files.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.terminal_run <|constrain|>json"
        '<|message|>{"command":"ls"}<|call|>',
        [T("ls")],
    ),
    Case(
        "mistral-v11-args",
        "Mistral / Devstral (tokenizer v11+): [TOOL_CALLS]NAME[ARGS]{...}",
        '[TOOL_CALLS]terminal_run[ARGS]{"command": "pytest -q"}',
        [T("pytest -q")],
    ),
    Case(
        "mistral-call-id",
        "Mistral with a call id before the arguments",
        '[TOOL_CALLS]read_file[CALL_ID]a1B2c3D4e[ARGS]{"path": "x.txt"}',
        [R("x.txt")],
    ),
    Case(
        "phi4-tool-call-marker",
        "Phi-4-mini / Granite `<|tool_call|>` before a JSON list",
        '<|tool_call|>[{"name": "read_file", "arguments": {"path": "b"}}]<|/tool_call|>',
        [R("b")],
    ),
    Case(
        "parameter-name-unquoted",
        "`<parameter name=path>` without quotes",
        "<function=write_code>\n<parameter name=path>a.py</parameter>\n"
        "<parameter name=content>\nx = 1\n</parameter>\n</function>",
        [W("a.py", "x = 1\n")],
    ),
    Case(
        "param-and-argument-tags",
        "`<param name=...>` / `<argument name=...>` instead of <parameter>",
        '<invoke name="write_code">\n<param name="path">a.py</param>\n'
        '<param name="content">x</param>\n</invoke>\n<invoke name="terminal_run">'
        '<argument name="command">cat a.py</argument></invoke>',
        [W("a.py", "x"), T("cat a.py")],
    ),
    Case(
        "glm-no-newline-after-name",
        "GLM-4.6/4.7 put the first <arg_key> right after the name",
        "<tool_call>read_file<arg_key>path</arg_key><arg_value>a.txt</arg_value></tool_call>",
        [R("a.txt")],
    ),
    # ------------------------------------------------------------ the tools' actions
    Case(
        "tools-xml-tags",
        "the four tool actions as plain XML tags, raw `&` in a URL kept",
        "<web_search><query>planact release notes</query></web_search>\n"
        "<web_fetch><url>https://example.org/a?b=1&c=2</url></web_fetch>\n"
        '<mcp_tool><name>calc__add</name><arguments>{"a": 1, "b": 2}</arguments></mcp_tool>\n'
        "<ask_user><question>Which database, SQLite or PostgreSQL?</question></ask_user>",
        [
            S("planact release notes"),
            U("https://example.org/a?b=1&c=2"),
            M("calc__add", '{"a": 1, "b": 2}'),
            A("Which database, SQLite or PostgreSQL?"),
        ],
    ),
    Case(
        "tools-qwen-function",
        "Qwen3-Coder calls web_search",
        "<tool_call>\n<function=web_search>\n<parameter=query>\nplanact nonce\n</parameter>\n"
        "</function>\n</tool_call>",
        [S("planact nonce")],
    ),
    Case(
        "tools-invoke",
        "function_calls/invoke with web_fetch",
        '<function_calls>\n<invoke name="web_fetch">\n<parameter name="url">'
        "https://example.org/</parameter>\n</invoke>\n</function_calls>",
        [U("https://example.org/")],
    ),
    Case(
        "tools-json-mcp",
        "a JSON call whose arguments hold a JSON object: kept as JSON text",
        '{"name": "mcp_tool", "arguments": {"name": "calc__add", "arguments": {"a": 1}}}',
        [M("calc__add", '{\n  "a": 1\n}')],
    ),
    Case(
        "tools-aliases",
        "other agents' names: Cline's ask_followup_question, search with q, fetch with link",
        '{"name": "ask_followup_question", "arguments": {"question": "Go on?"}}\n'
        '{"name": "search", "arguments": {"q": "x"}}\n'
        '{"name": "fetch_url", "arguments": {"link": "https://a.example"}}',
        [A("Go on?"), S("x"), U("https://a.example")],
    ),
    Case(
        "tools-glm",
        "GLM arg_key/arg_value with web_search",
        "<tool_call>web_search\n<arg_key>query</arg_key>\n<arg_value>x y</arg_value>\n</tool_call>",
        [S("x y")],
    ),
    Case(
        "tools-kimi",
        "Kimi K2 markers with web_fetch",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.web_fetch:0"
        '<|tool_call_argument_begin|>{"url": "https://a.example"}<|tool_call_end|>'
        "<|tool_calls_section_end|>",
        [U("https://a.example")],
    ),
    Case(
        "tools-deepseek-v31",
        "DeepSeek V3.1 markers with ask_user",
        f'{DS_ALL_BEGIN}{DS_BEGIN}ask_user{DS_SEP}{{"question": "ok?"}}{DS_END}{DS_ALL_END}',
        [A("ok?")],
    ),
    Case(
        "tools-mcp-missing-arguments",
        "mcp_tool without its arguments: the model is told what it takes",
        "<mcp_tool><name>calc__add</name></mcp_tool>",
        Err("`mcp_tool` is missing required parameter(s): arguments"),
    ),
    # ------------------------------------------------------------ DeepSeek V3.2 DSML
    Case(
        "deepseek-v32-dsml",
        "DeepSeek V3.2: DSML function_calls, invoke and parameter with full-width bars",
        f"<{DSML}function_calls>\n"
        f'<{DSML}invoke name="web_search">\n'
        f'<{DSML}parameter name="query" string="true">planact nonce</{DSML}parameter>\n'
        f"</{DSML}invoke>\n"
        f'<{DSML}invoke name="write_code">\n'
        f'<{DSML}parameter name="path" string="true">a.py</{DSML}parameter>\n'
        f'<{DSML}parameter name="content" string="true">if a < b:\n    x = "</{DSML}p>"\n'
        f"</{DSML}parameter>\n"
        f"</{DSML}invoke>\n"
        f"</{DSML}function_calls>",
        [S("planact nonce"), W("a.py", 'if a < b:\n    x = "</' + DSML + 'p>"\n')],
    ),
    Case(
        "deepseek-v32-dsml-json-value",
        'DSML with string="false": the value is JSON, kept as its text',
        f"Let me call the tool.\n\n<{DSML}function_calls>\n"
        f'<{DSML}invoke name="mcp_tool">\n'
        f'<{DSML}parameter name="name" string="true">calc__add</{DSML}parameter>\n'
        f'<{DSML}parameter name="arguments" string="false">{{"a": 1, "b": 2}}'
        f"</{DSML}parameter>\n</{DSML}invoke>\n</{DSML}function_calls>",
        [M("calc__add", '{"a": 1, "b": 2}')],
    ),
    # ------------------------------------------------------------ Anthropic's legacy tool use
    Case(
        "anthropic-legacy-invoke",
        "Claude 2.1-era prompts: <invoke><tool_name>NAME</tool_name><parameters><p>v</p>",
        "<function_calls>\n<invoke>\n<tool_name>write_code</tool_name>\n<parameters>\n"
        "<path>src/app.py</path>\n<content>\nprint('</parameters>')\n</content>\n"
        "</parameters>\n</invoke>\n<invoke>\n<tool_name>terminal_run</tool_name>\n"
        "<parameters>\n<command>python3 src/app.py</command>\n</parameters>\n</invoke>\n"
        "</function_calls>",
        [W("src/app.py", "print('</parameters>')\n"), T("python3 src/app.py")],
    ),
    Case(
        "anthropic-legacy-invoke-tool",
        "legacy invoke with one of the tools and an alias name",
        "<function_calls><invoke><tool_name>search_web</tool_name><parameters>"
        "<query>planact</query></parameters></invoke></function_calls>",
        [S("planact")],
    ),
    # ------------------------------------------------------------ Qwen3 malformed parameters
    Case(
        "qwen3-parameter-without-gt",
        "Qwen3 drops the `>` after the parameter name: the value starts on the next line",
        "<tool_call>\n<function=write_code>\n<parameter=path\nsrc/a.py\n</parameter>\n"
        "<parameter=content\nx = 1\n</parameter>\n</function>\n</tool_call>",
        [W("src/a.py", "x = 1\n")],
        warnings=("<parameter=path had no `>`",),
    ),
    Case(
        "qwen3-value-in-parameter-opener",
        "Qwen3 writes the value into the opener: <parameter=command=str_replace</parameter>",
        "<function=edit_file>\n<parameter=path=src/a.py</parameter>\n"
        "<parameter=old_str>\nA = 1\n</parameter>\n<parameter=new_str>\nA = 2\n</parameter>\n"
        "</function>",
        [E("src/a.py", "A = 1\n", "A = 2\n")],
        warnings=("<parameter=path had no `>`",),
    ),
    # ------------------------------------------------------------ pretty-printed XML
    Case(
        "dedent-block-deeper-than-close-tag",
        "the whole content indented one level deeper than its tags: dedented as a block",
        "<write_code>\n  <path>pkg/util.py</path>\n  <content>\n    def add(a, b):\n"
        "        return a + b\n\n    class C:\n        pass\n  </content>\n</write_code>",
        [W("pkg/util.py", "def add(a, b):\n    return a + b\n\nclass C:\n    pass\n")],
    ),
    Case(
        "dedent-block-close-tag-after-last-line",
        "indented tags, content on its own lines, the close tag right after the last line",
        "<write_code>\n    <path>a.py</path>\n    <content>\n      if x:\n          y()</content>\n"
        "</write_code>",
        [W("a.py", "if x:\n    y()")],
    ),
    Case(
        "dedent-not-when-the-tag-is-not-indented",
        "tags at the margin: content indented as a whole is the file's own indentation",
        "<write_code>\n<path>a.py</path>\n<content>\n    x = 1\n    y = 2\n</content>\n"
        "</write_code>",
        [W("a.py", "    x = 1\n    y = 2\n")],
    ),
    Case(
        "dedent-not-when-a-line-is-left-of-the-tag",
        "a line left of the indented opener: nothing is taken off",
        "<write_code>\n  <path>a.py</path>\n  <content>\n    x = 1\ny = 2</content>\n</write_code>",
        [W("a.py", "    x = 1\ny = 2")],
    ),
]
