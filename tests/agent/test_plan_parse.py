"""The planner's reply parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.agent.plan_parse import EXAMPLE, PlanFormatError, parse_plan


def t(title: str, description: str = "", requirement: str = "") -> dict[str, str]:
    return {"title": title, "description": description, "requirement": requirement}


TWO = (
    '[{"title": "Write app", "description": "Create app.py", "requirement": "prints 1"},'
    ' {"title": "Test", "description": "Run it"}]'
)
TWO_TASKS = [t("Write app", "Create app.py", "prints 1"), t("Test", "Run it")]

CASES: list[tuple[str, str, str, list[dict[str, str]]]] = [
    ("json-bare", TWO, "", TWO_TASKS),
    ("json-fenced", f"```json\n{TWO}\n```", "", TWO_TASKS),
    (
        "json-prose-fenced",
        f"Sure! I'll build it in two steps.\n\n```json\n{TWO}\n```\nLet me start.",
        "Sure! I'll build it in two steps.",
        TWO_TASKS,
    ),
    ("json-prose-bare", f"Plan below:\n{TWO}", "Plan below:", TWO_TASKS),
    ("json-object-tasks", '{"tasks": ' + TWO + "}", "", TWO_TASKS),
    ("json-object-plan", 'Here: {"plan": ' + TWO + "}", "Here:", TWO_TASKS),
    (
        "json-trailing-comma",
        '[{"title": "A", "description": "a",},]',
        "",
        [t("A", "a")],
    ),
    (
        "json-key-variants",
        '[{"name": "A", "details": "a", "acceptance_criteria": ["x", "y"]}]',
        "",
        [t("A", "a", "- x\n- y")],
    ),
    (
        "json-brackets-in-prose-first",
        "Use a list [like this] of tasks:\n" + TWO,
        "Use a list [like this] of tasks:",
        TWO_TASKS,
    ),
    (
        "json-after-think",
        "<think>hmm [1, 2]</think>\nOK.\n" + TWO,
        "OK.",
        TWO_TASKS,
    ),
    ("json-stray-think-close", "reasoning...</think>\n" + TWO, "", TWO_TASKS),
    (
        "harmony-draft-plan-in-analysis",
        '<|channel|>analysis<|message|>Draft: [{"title": "Delete everything"}] no.<|end|>'
        "<|start|>assistant<|channel|>final<|message|>Two steps.\n" + TWO + "<|return|>",
        "Two steps.",
        TWO_TASKS,
    ),
    (
        "reasoning-tag-draft-plan",
        '<reasoning>[{"title": "Wipe the disk"}]</reasoning>\nHere.\n' + TWO,
        "Here.",
        TWO_TASKS,
    ),
    (
        "markdown-headings",
        "I'll do it.\n\n## Write the script\n- Create hello.py printing hi\n"
        "- Requirement: `python3 hello.py` prints hi\n\n## Document it\n- Add a README\n",
        "I'll do it.",
        [
            t("Write the script", "- Create hello.py printing hi", "`python3 hello.py` prints hi"),
            t("Document it", "- Add a README"),
        ],
    ),
    (
        "markdown-task-prefix-and-bold-labels",
        "### Task 1: Setup\n* **Description:** make venv\n* **Requirement:** venv exists\n",
        "",
        [t("Setup", "make venv", "venv exists")],
    ),
    (
        "markdown-plan-heading-skipped",
        "## Plan\n## Build\n- do it\n",
        "",
        [t("Build", "- do it")],
    ),
    (
        "numbered",
        "Here is the plan:\n1. Create the app\n2. Write tests\n3. Run them\n",
        "Here is the plan:",
        [t("Create the app"), t("Write tests"), t("Run them")],
    ),
    (
        "numbered-bold-with-details",
        "1. **Scaffold** - create the package\n   - Requirement: imports work\n"
        "2) **Ship**: build the wheel\n",
        "",
        [t("Scaffold", "create the package", "imports work"), t("Ship", "build the wheel")],
    ),
    (
        "numbered-then-prose",
        "1. Do A\n2. Do B\n\nThat's all.",
        "",
        [t("Do A"), t("Do B")],
    ),
]


@pytest.mark.parametrize(
    ("text", "prose", "tasks"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_parse_plan(text: str, prose: str, tasks: list[dict[str, str]]) -> None:
    assert parse_plan(text) == (prose, tasks)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "empty"),
        ('{"tasks": []}', "empty"),
        ("I think we should just do it.", "JSON array of tasks"),
        ('["Set up", "Build"]', "JSON array of tasks"),
        ("", "JSON array of tasks"),
        ('[{"title": "A", "description": }]', "did not parse"),
        ("<think>planning forever", "JSON array of tasks"),
    ],
)
def test_plan_errors(text: str, message: str) -> None:
    with pytest.raises(PlanFormatError) as info:
        parse_plan(text)
    assert message in str(info.value)
    assert '"title"' in str(info.value)  # shows the format to use


def test_plan_error_is_value_error() -> None:
    assert issubclass(PlanFormatError, ValueError)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "[",
                "]",
                "{",
                "}",
                '"title"',
                ":",
                '"x"',
                ",",
                "## ",
                "1. ",
                "- ",
                "\n",
                "<think>",
                "</think>",
                "<|channel|>analysis<|message|>",
                "<|start|>assistant<|channel|>final<|message|>",
                "<|end|>",
                "[THINK]",
                "[/THINK]",
                "```json\n",
                "```",
                "Requirement: ",
                "tasks",
                "a",
            ]
        ),
        max_size=40,
    ).map("".join)
)
def test_plan_parser_never_crashes(text: str) -> None:
    try:
        prose, tasks = parse_plan(text)
    except PlanFormatError as exc:
        assert str(exc)
    else:
        assert tasks
        assert isinstance(prose, str)
        for task in tasks:
            assert set(task) == {"title", "description", "requirement"}
            assert all(isinstance(v, str) for v in task.values())


def test_hostile_plans_are_format_errors_never_crashes() -> None:
    """A model reply can never crash a run, the planner's included."""
    for text in ('{"tasks": ' * 5000, "[" * 100_000, "## a\n- b\n" * 200_000):
        with pytest.raises(PlanFormatError) as info:
            parse_plan(text)
        assert info.value.__cause__ is None


NO_PLAN = sorted((Path(__file__).parent / "data" / "no_plan").glob("*.txt"))


@pytest.mark.parametrize("path", NO_PLAN, ids=[p.stem for p in NO_PLAN])
def test_replies_that_only_hold_a_list_are_no_plan(path: Path) -> None:
    """Real garbage: a list inside code, a call or a sentence, bare strings, the service's
    own note repeated. None is a plan, and the model is told what a plan looks like."""
    with pytest.raises(PlanFormatError) as info:
        parse_plan(path.read_text())
    assert EXAMPLE in str(info.value)


def test_a_list_inside_code_is_named_as_such_to_the_model() -> None:
    with pytest.raises(PlanFormatError) as info:
        parse_plan((Path(__file__).parent / "data/no_plan/a_call_with_task_dicts.txt").read_text())
    assert "a list inside code, a call or a sentence is not a plan" in str(info.value)
    assert info.value.user == "it held no plan (only a list inside code or a sentence)"
    assert not info.value.words


def test_the_services_example_repeated_is_no_plan_but_a_real_plan_beside_it_is() -> None:
    with pytest.raises(PlanFormatError) as info:
        parse_plan(EXAMPLE)
    assert info.value.user == "it repeated the service's example instead of giving a plan"
    prose, tasks = parse_plan(f"{EXAMPLE}\nMy plan:\n{TWO}")
    assert tasks == TWO_TASKS and prose.endswith("My plan:")


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{TWO}\n```",
        f"Plan:\n```\n{TWO}\n```",
        f"**The plan:** {TWO}",
        f"  {TWO}  \n\nThat's it.",
    ],
)
def test_a_plan_on_lines_of_its_own_or_after_a_label_is_a_plan(text: str) -> None:
    assert parse_plan(text)[1] == TWO_TASKS
