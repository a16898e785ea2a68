"""The docs list what the code has, no more and no less: the actions of docs/api.md's tables
are the action registry's (with their approval classes and stream kinds), and the settings
named in the docs and shown in .env.example are backend/config.py's Settings."""

from __future__ import annotations

from pydantic import Field

from backend.actions import registry
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

ROW = "| `read_file`, `finish`, `ask_user` | none | runs | runs | runs |"


def test_docs_api_tables_list_exactly_the_registered_actions() -> None:
    assert action_problems(API_DOC.read_text(encoding="utf-8"), registry.defs()) == []


def test_an_action_the_docs_miss_or_invent_or_misclass_is_named() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    assert ROW in text
    missing = text.replace(ROW, "| `read_file`, `ask_user` | none | runs | runs | runs |")
    assert action_problems(missing, registry.defs()) == [
        "finish is an action the approval table of docs/api.md does not list"
    ]
    invented = text.replace(ROW, ROW + "\n| `teleport` | none | runs | runs | runs |")
    assert action_problems(invented, registry.defs()) == [
        "docs/api.md lists an action 'teleport' the code does not have"
    ]
    misclassed = text.replace(
        ROW, ROW.replace("`finish`, ", "") + "\n| `finish` | `web` | runs | asks | asks |"
    )
    assert action_problems(misclassed, registry.defs()) == [
        "finish: the docs say class `web`, its ActionDef None",
        "finish: the docs say ['runs', 'asks', 'asks'] for never/risky/always",
    ]
    rekinded = text.replace(
        "| `web_search` (`query`) | `search` |", "| `web_search` (`query`) | `find` |"
    )
    assert action_problems(rekinded, registry.defs()) == [
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
