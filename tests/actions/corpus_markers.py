"""More real-looking replies: vendor tool-call markers laid out over several lines, and
reasoning in every dialect that marks it (gpt-oss's harmony `analysis` channel included).

Same shape as corpus.py (its helpers build the expectations); test_action_corpus.py runs
both tables.
"""

from __future__ import annotations

from .corpus import (
    DS_ALL_BEGIN,
    DS_ALL_END,
    DS_BEGIN,
    DS_END,
    DS_SEP,
    Case,
    Err,
    F,
    R,
    T,
    W,
)

KIMI_SECTION = "<|tool_calls_section_begin|>"
KIMI_SECTION_END = "<|tool_calls_section_end|>"
KIMI_BEGIN = "<|tool_call_begin|>"
KIMI_ARGS = "<|tool_call_argument_begin|>"
KIMI_END = "<|tool_call_end|>"

HARMONY_ANALYSIS = "<|channel|>analysis<|message|>"
HARMONY_NEXT = "<|start|>assistant"

MARKER_CASES: list[Case] = [
    # ------------------------------------------------------------ calls over several lines
    Case(
        "kimi-k2-newline-after-call-begin",
        "Kimi K2 as ik_llama.cpp documents it: a newline after each marker, two calls",
        "I'll read the settings, then list the folder.\n"
        f"{KIMI_SECTION}\n{KIMI_BEGIN}\nfunctions.read_file:0{KIMI_ARGS}\n"
        '{"path": "config/settings.yaml"}\n'
        f"{KIMI_END}\n{KIMI_BEGIN}\nfunctions.terminal_run:1{KIMI_ARGS}\n"
        '{"command": "ls -la config"}\n'
        f"{KIMI_END}\n{KIMI_SECTION_END}",
        [R("config/settings.yaml"), T("ls -la config")],
    ),
    Case(
        "kimi-k2-newline-before-argument-marker",
        "Kimi K2 with the name on its own line before the argument marker; content exact",
        f"{KIMI_SECTION}\n{KIMI_BEGIN}\n  functions.write_code:0\n{KIMI_ARGS}\n"
        '{"path": "src/cmp.py", "content": "if a < b && c > d:\\n    x = \\"&amp;\\"\\n"}'
        f"\n{KIMI_END}\n{KIMI_SECTION_END}",
        [W("src/cmp.py", 'if a < b && c > d:\n    x = "&amp;"\n')],
    ),
    Case(
        "deepseek-v31-newline-after-call-begin",
        "DeepSeek V3.1 (thinking: the template opened <think>) with a newline after each marker",
        "The tests live in tests/; run them first.</think>\n\n"
        f"{DS_ALL_BEGIN}\n{DS_BEGIN}\nterminal_run{DS_SEP}"
        '{"command": "pytest -q tests"}'
        f"{DS_END}\n{DS_BEGIN}\nread_file\n{DS_SEP}\n"
        '{"path": "tests/test_api.py"}\n'
        f"{DS_END}\n{DS_ALL_END}",
        [T("pytest -q tests"), R("tests/test_api.py")],
    ),
    Case(
        "deepseek-r1-newline-after-call-begin",
        "DeepSeek R1 as ik_llama.cpp documents it: begin, newline, function<sep>NAME, a fence",
        f"{DS_ALL_BEGIN}\n{DS_BEGIN}\nfunction{DS_SEP}write_code\n```json\n"
        '{"path": "notes.md", "content": "# Notes\\n\\n- <b>bold</b> & more\\n"}\n```\n'
        f"{DS_END}\n{DS_ALL_END}",
        [W("notes.md", "# Notes\n\n- <b>bold</b> & more\n")],
    ),
    # ------------------------------------------------------------ harmony (gpt-oss)
    Case(
        "harmony-analysis-xml-draft-not-run",
        "gpt-oss drafts a destructive action in analysis, decides against it, acts in final",
        f"{HARMONY_ANALYSIS}The build folder looks stale. I could clear it with\n"
        "<terminal_run><command>rm -rf build/ src/</command></terminal_run>\n"
        "but that would also delete src/. Better to look at the Makefile first.<|end|>"
        f"{HARMONY_NEXT}<|channel|>final<|message|>Let me read the Makefile.\n"
        "<read_file><path>Makefile</path></read_file><|return|>",
        [R("Makefile")],
    ),
    Case(
        "harmony-analysis-json-draft-not-run",
        "a JSON tool call drafted in analysis never runs; the commentary call does",
        f'{HARMONY_ANALYSIS}Option: {{"name": "terminal_run", "arguments": '
        '{"command": "rm -rf ~/project"}} -- no, too dangerous. Check git status.<|end|>'
        f"{HARMONY_NEXT}<|channel|>commentary to=functions.terminal_run <|constrain|>json"
        '<|message|>{"command": "git status --short"}<|call|>',
        [T("git status --short")],
    ),
    Case(
        "harmony-analysis-quoted-call-not-run",
        "a whole commentary call quoted inside analysis (before its end) is reasoning",
        f"{HARMONY_ANALYSIS}We would send {HARMONY_NEXT}<|channel|>commentary "
        "to=functions.terminal_run <|constrain|>json"
        '<|message|>{"command": "rm -rf /srv/data"}<|call|> but the user said keep the data.'
        f"<|end|>{HARMONY_NEXT}<|channel|>final<|message|>I will not delete /srv/data.<|return|>",
        Err("held the header of another message before its <|end|>"),
    ),
    Case(
        "harmony-analysis-end-token-left-out",
        "the model left out <|end|> before its real call: nothing runs, and it is told why",
        f"{HARMONY_ANALYSIS}Need the status.{HARMONY_NEXT}<|channel|>commentary "
        'to=functions.terminal_run <|constrain|>json<|message|>{"command": "git status"}'
        "<|call|>",
        Err("End the analysis message with <|end|>"),
    ),
    Case(
        "harmony-call-addressed-from-analysis",
        "a call addressed to=functions.NAME in the analysis channel is reasoning: told so",
        "<|channel|>analysis to=functions.terminal_run <|constrain|>json"
        '<|message|>{"command": "rm -rf build"}<|call|>',
        Err("from the analysis channel"),
    ),
    Case(
        "harmony-analysis-never-ended",
        "an analysis message with no <|end|>: nothing in it runs",
        f"{HARMONY_ANALYSIS}First wipe it: <terminal_run><command>rm -rf /tmp/x</command>"
        "</terminal_run>",
        Err("never closed its analysis-channel reasoning block"),
    ),
    Case(
        "harmony-analysis-cut-off",
        "cut off by the length limit inside analysis",
        f"{HARMONY_ANALYSIS}Long reasoning about the build",
        Err("cut off inside its analysis-channel", truncated=True),
        finish_reason="length",
    ),
    Case(
        "harmony-final-channel-write-byte-exact",
        "an action in the final channel runs, its content byte-exact",
        f"{HARMONY_ANALYSIS}Write the helper.<|end|>{HARMONY_NEXT}<|channel|>final<|message|>"
        "<write_code>\n<path>cmp.sh</path>\n<content>\n[ $a -lt 3 ] && echo '<ok>' 2>&1\n"
        "</content>\n</write_code><|return|>",
        [W("cmp.sh", "[ $a -lt 3 ] && echo '<ok>' 2>&1\n")],
    ),
    Case(
        "harmony-recipient-in-role",
        "the recipient written in the role part of the header (`assistant to=…`) runs",
        f"{HARMONY_ANALYSIS}Look at it.<|end|>"
        "<|start|>assistant to=functions.read_file<|channel|>commentary json"
        '<|message|>{"path": "README.md"}<|call|>',
        [R("README.md")],
    ),
    Case(
        "harmony-analysis-in-a-fence-is-an-example",
        "a harmony analysis header inside a code fence is text, not reasoning",
        "```\n<|channel|>analysis<|message|>example\n```\n<finish><message>done</message></finish>",
        [F("done")],
    ),
    # ------------------------------------------------------------ other reasoning markers
    Case(
        "reasoning-tag-draft-not-run",
        "a <reasoning> block (some fine-tunes) holds a draft that never runs",
        "<reasoning>\nDelete the cache?\n<terminal_run><command>rm -rf .cache</command>"
        "</terminal_run>\nNo: it holds the downloads.\n</reasoning>\n"
        "<terminal_run><command>du -sh .cache</command></terminal_run>",
        [T("du -sh .cache")],
    ),
    Case(
        "seed-think-namespaced",
        "Seed-OSS's <seed:think> block",
        "<seed:think>Try <finish><message>too early</message></finish>? Not yet.</seed:think>\n"
        "<read_file><path>a.txt</path></read_file>",
        [R("a.txt")],
    ),
    Case(
        "magistral-think-brackets",
        "Magistral's [THINK]…[/THINK] with a JSON draft inside",
        '[THINK]Maybe {"name": "terminal_run", "arguments": {"command": "git push -f"}}? '
        "No force pushes.[/THINK]\n"
        '{"name": "terminal_run", "arguments": {"command": "git push"}}',
        [T("git push")],
    ),
    Case(
        "kimi-think-triangles",
        "Kimi's ◁think▷…◁/think▷",
        "\u25c1think\u25b7<terminal_run><command>shutdown now</command></terminal_run> is wrong"
        "\u25c1/think\u25b7<terminal_run><command>uptime</command></terminal_run>",
        [T("uptime")],
    ),
    Case(
        "command-a-thinking-markers",
        "Command A Reasoning's <|START_THINKING|>…<|END_THINKING|>",
        "<|START_THINKING|>Overwrite with <write_code><path>db.sqlite</path><content>"
        "</content></write_code>? No.<|END_THINKING|><|START_RESPONSE|>"
        "<read_file><path>db.sqlite</path></read_file><|END_RESPONSE|>",
        [R("db.sqlite")],
    ),
    Case(
        "magistral-stray-close",
        "the template opened [THINK]: only its closer is in the reply, the draft before is dropped",
        "<terminal_run><command>rm -rf dist</command></terminal_run> hmm, no.[/THINK]\n"
        "<terminal_run><command>ls dist</command></terminal_run>",
        [T("ls dist")],
    ),
    Case(
        "reasoning-tag-unclosed",
        "an unclosed <reasoning> block: nothing runs, and the model is told which closer",
        "<reasoning>\nI will write <write_code><path>a</path><content>x</content></write_code>"
        " and then think more",
        Err("close it with </reasoning>"),
    ),
]
