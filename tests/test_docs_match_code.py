"""The docs list what the code has, no more and no less: the actions of docs/api.md's tables
are the action registry's (with their approval classes and stream kinds; its tables of them
are made from the registry), and the settings named in the docs and shown in .env.example
are backend/config.py's Settings."""

from __future__ import annotations

import pytest
from pydantic import Field

from backend.actions import builtin_registry
from backend.actions.registry.docs import MissingTable, approval_table, rewrite
from backend.config import Settings
from tests.docs_check import (
    API_DOC,
    DOCS,
    ENV_EXAMPLE,
    action_problems,
    doc_table_names,
    env_example_names,
    read_elsewhere,
    setting_names,
    setting_problems,
)

REGISTRY = builtin_registry()
BACKEND = API_DOC.parents[1] / "backend"
# the approval table's row of the actions that never ask, as the registry makes it
ROW = next(line for line in approval_table(REGISTRY).splitlines() if "| none |" in line)
NEVER_ASKS = [d.name for d in REGISTRY.defs() if d.handling.approval is None]


def test_docs_api_tables_of_the_actions_are_made_from_the_registry() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    assert rewrite(text) == text, "docs/api.md's action tables are old: make frontend-types"
    assert ROW in text


def test_docs_without_a_tables_markers_are_refused_by_name() -> None:
    text = API_DOC.read_text(encoding="utf-8").replace("<!-- end: approval classes -->", "")
    with pytest.raises(MissingTable, match="approval classes"):
        rewrite(text)


def test_docs_api_tables_list_exactly_the_registered_actions() -> None:
    assert action_problems(API_DOC.read_text(encoding="utf-8"), REGISTRY.defs()) == []


def test_an_action_the_docs_miss_or_invent_or_misclass_is_named() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    last = NEVER_ASKS[-1]
    fewer = ", ".join(f"`{n}`" for n in NEVER_ASKS[:-1])
    missing = text.replace(ROW, f"| {fewer} | none | runs | runs | runs |")
    assert action_problems(missing, REGISTRY.defs()) == [
        f"{last} is an action the approval table of docs/api.md does not list"
    ]
    invented = text.replace(ROW, ROW + "\n| `teleport` | none | runs | runs | runs |")
    assert action_problems(invented, REGISTRY.defs()) == [
        "docs/api.md lists an action 'teleport' the code does not have"
    ]
    misclassed = text.replace(
        ROW, f"| {fewer} | none | runs | runs | runs |\n| `{last}` | `web` | runs | asks | asks |"
    )
    assert action_problems(misclassed, REGISTRY.defs()) == [
        f"{last}: the docs say class `web`, its ActionDef None",
        f"{last}: the docs say ['runs', 'asks', 'asks'] for never/risky/always",
    ]
    rekinded = text.replace(
        "| `web_search` (`query`) | `search` |", "| `web_search` (`query`) | `find` |"
    )
    assert action_problems(rekinded, REGISTRY.defs()) == [
        "web_search: the docs say kind `find`, it is search"
    ]


def _docs() -> list[str]:
    return [path.read_text(encoding="utf-8") for path in DOCS]


def test_docs_and_env_example_name_exactly_the_settings() -> None:
    docs = _docs()
    env = env_example_names(ENV_EXAMPLE.read_text(encoding="utf-8"))
    problems = setting_problems(
        setting_names(), env, doc_table_names(docs), "\n".join(docs), read_elsewhere()
    )
    assert problems == []


def test_a_setting_the_docs_miss_or_a_variable_nothing_reads_is_named() -> None:
    class MoreSettings(Settings):
        sandbox_gpus: int = Field(default=0)

    docs = _docs()
    env = env_example_names(ENV_EXAMPLE.read_text(encoding="utf-8"))
    other = read_elsewhere()
    assert setting_problems(
        setting_names(MoreSettings), env, doc_table_names(docs), "\n".join(docs), other
    ) == [
        "SANDBOX_GPUS is a setting .env.example does not show",
        "SANDBOX_GPUS is a setting the docs never name",
    ]
    table = (
        "| variable | default | meaning |\n| --- | --- | --- |\n| `SANDBOX_GPU` | `0` | GPUs |\n"
    )
    listed = doc_table_names([*docs, table])
    assert setting_problems(
        setting_names(), env | {"WEB_TIMEOUTS"}, listed, "\n".join(docs), other
    ) == [
        ".env.example sets WEB_TIMEOUTS, which nothing reads",
        "the docs' tables list SANDBOX_GPU, which nothing reads",
    ]


def test_the_code_cites_only_documents_the_repository_has() -> None:
    # "DESIGN" was cited and is not in the repository: the docs are docs/*.md and README.md
    cited = [
        path.relative_to(BACKEND.parent)
        for path in sorted(BACKEND.rglob("*.py"))
        if 'DESIGN "' in path.read_text(encoding="utf-8")
    ]
    assert cited == []
