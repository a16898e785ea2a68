"""The runtime registry: one list of runtimes that settings, API, CLI, probe, prompts and UI
read. A runtime a deployment adds (``RUNTIME_MODULES``) is offered, accepted and described to
the model with nothing else changed; the registry of other settings (every other test's)
never has it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from backend import cli
from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from backend.runtime import make_runtime
from backend.runtime.docker import DockerRuntime
from backend.runtime.local import LocalRuntime
from backend.runtime.registry import (
    BUILTIN,
    RuntimeModuleError,
    Runtimes,
    UnknownRuntime,
    builtin_runtimes,
    for_settings,
)
from backend.runtime.sandboxing import SandboxConfigError, local_runtime_for_process
from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.sse_client import collect
from tests.support.plugin_runtimes import (
    NOT_A_RUNTIME,
    PLANNING_NOTE,
    PROBED,
    THINKING_NOTE,
    TINY,
    Impostor,
    ProbedRuntime,
    TinyRuntime,
)
from tests.support.settings import make_settings

BUILTIN_NAMES = builtin_runtimes().names()


@pytest.fixture
def tiny(tmp_path: Path) -> Settings:
    """Settings whose registry has the tiny runtime too."""
    return make_settings(tmp_path, runtime_modules=TINY)


@pytest.fixture
def probed(tmp_path: Path) -> Settings:
    ProbedRuntime.asked.clear()
    ProbedRuntime.answer = True
    return make_settings(tmp_path, runtime_modules=PROBED)


SCRIPT: list[tuple[str, Any]] = [
    ("planning", plan_reply("List the files")),
    ("thinking", run("ls -la") + finish("Listed.")),
]


def system_prompt(messages: list[dict[str, Any]]) -> str:
    return str(messages[0]["content"])


# ---- the registry itself -------------------------------------------------------------------


def test_builtin_runtimes_load_by_name_in_their_order() -> None:
    registry = builtin_runtimes()
    assert registry.names() == list(BUILTIN)
    assert registry.get("local") is LocalRuntime
    assert registry.get("docker") is DockerRuntime
    with pytest.raises(UnknownRuntime, match=f"one of {', '.join(BUILTIN)}"):
        registry.get("nope")


def test_an_added_runtime_is_in_a_new_registry_only(tmp_path: Path) -> None:
    mine = builtin_runtimes().with_runtimes(TinyRuntime)
    assert mine.names() == [*BUILTIN, "tiny"] and mine.get("tiny") is TinyRuntime
    assert "tiny" not in builtin_runtimes()
    assert for_settings(make_settings(tmp_path)).names() == BUILTIN_NAMES
    # the settings that name it make the same registry
    assert for_settings(make_settings(tmp_path, runtime_modules=f" {TINY} ,")).names() == (
        mine.names()
    )


def test_a_class_named_as_another_runtime_is_refused() -> None:
    with pytest.raises(ValueError, match="'local' is already registered"):
        builtin_runtimes().with_runtimes(Impostor)
    mine = builtin_runtimes().with_runtimes(TinyRuntime)
    with pytest.raises(ValueError, match="'tiny' is already registered"):
        mine.with_runtimes(TinyRuntime)


def test_a_path_that_names_another_class_is_refused_when_loaded() -> None:
    mixed = Runtimes({"tiny": "tests.support.plugin_runtimes:ProbedRuntime"})
    with pytest.raises(UnknownRuntime, match="is named 'probed', registered as 'tiny'"):
        mixed.get("tiny")


@pytest.mark.parametrize(
    ("modules", "said"),
    [
        ("no.such.module:Thing", r"'no\.such\.module:Thing' cannot be imported"),
        ("tests.support.plugin_runtimes:Nothing", "cannot be imported"),
        ("tests.support.plugin_runtimes", "is not module:Class"),
        (NOT_A_RUNTIME, "is not a BaseRuntime subclass"),
        ("tests.support.plugin_runtimes:Impostor", "'local' is already registered"),
    ],
)
def test_runtime_modules_that_cannot_be_read_stop_the_start_saying_why(
    tmp_path: Path, modules: str, said: str
) -> None:
    settings = make_settings(tmp_path, runtime_modules=modules)
    with pytest.raises(RuntimeModuleError, match=said):
        for_settings(settings)
    with pytest.raises(SandboxConfigError, match=f"RUNTIME_MODULES: .*{said}"):
        local_runtime_for_process(settings)


def test_a_process_starts_with_registered_runtimes_only(tmp_path: Path) -> None:
    assert local_runtime_for_process(make_settings(tmp_path, runtime="tiny", runtime_modules=TINY))
    names = ", ".join([*BUILTIN_NAMES, "tiny"])
    with pytest.raises(SandboxConfigError, match=f"'nope' is not a runtime: one of {names}"):
        local_runtime_for_process(make_settings(tmp_path, runtime="nope", runtime_modules=TINY))
    with pytest.raises(SandboxConfigError, match="'tiny' is not a runtime"):
        local_runtime_for_process(make_settings(tmp_path, runtime="tiny"))


def test_make_runtime_builds_the_named_class_from_settings(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, runtime="tiny", terminal_timeout=7, runtime_modules=TINY)
    made = make_runtime(settings)
    assert isinstance(made, TinyRuntime) and made.terminal_timeout == 7
    assert isinstance(make_runtime(settings, "local"), LocalRuntime)
    with pytest.raises(UnknownRuntime):
        make_runtime(make_settings(tmp_path), "tiny")


# ---- through the API ------------------------------------------------------------------------


def test_a_registered_runtime_is_offered_accepted_and_described_to_the_model(
    tiny: Settings,
) -> None:
    llm = ScriptedLLM(list(SCRIPT))
    with TestClient(create_app(tiny, llm=llm)) as client:
        offered = client.get("/api/settings").json()["runtimes"]
        assert offered[0] == "local" and "tiny" in offered
        with client.stream(
            "POST",
            "/api/agent/run",
            json={"goal": "list files", "runtime": "tiny", "mode": "agent"},
        ) as resp:
            assert resp.status_code == 200
            messages, end = collect(resp.iter_lines())
    assert llm.errors == []
    assert end is not None and end["status"] == "completed"
    (ran,) = [
        m
        for m in messages
        if m["meta"]["action_type"] == "terminal_run" and m["status"] == "success"
    ]
    assert "tiny ran 'ls -la' in ." in ran["content"]
    planning, thinking = llm.calls
    assert f"running shell commands ({PLANNING_NOTE})" in system_prompt(planning.messages)
    assert f"workspace folder ({THINKING_NOTE})" in system_prompt(thinking.messages)


def test_the_local_runtime_keeps_its_prompt_note(settings: Settings) -> None:
    llm = ScriptedLLM(list(SCRIPT))
    with (
        TestClient(create_app(settings, llm=llm)) as client,
        client.stream(
            "POST",
            "/api/agent/run",
            json={"goal": "list files", "runtime": "local", "mode": "agent"},
        ) as resp,
    ):
        _, end = collect(resp.iter_lines())
    assert end is not None and end["status"] == "completed"
    planning, thinking = llm.calls
    assert "running shell commands (on this machine)" in system_prompt(planning.messages)
    assert "workspace folder (commands run in this folder)" in system_prompt(thinking.messages)


def test_an_unknown_runtime_is_refused_with_the_registered_names(tiny: Settings) -> None:
    llm = ScriptedLLM([])
    with TestClient(create_app(tiny, llm=llm)) as client:
        r = client.post("/api/agent/run", json={"goal": "x", "runtime": "nope"})
        assert r.status_code == 400
        names = ", ".join([*BUILTIN_NAMES, "tiny"])
        assert r.json()["error"]["message"] == f"'runtime' must be one of {names}."
        assert client.get("/api/conversations").json() == []
    assert llm.calls == []


def test_a_probed_runtime_is_offered_once_the_probe_says_it_works(probed: Settings) -> None:
    with TestClient(create_app(probed, llm=ScriptedLLM([]))) as client:
        wait_for(
            lambda: "probed" in client.get("/api/settings").json()["runtimes"],
            what="the probe to offer the runtime",
        )
        assert client.get("/api/health").json()["runtimes"][0] == "local"


def test_a_probed_runtime_that_is_not_available_is_refused_with_its_note(
    probed: Settings,
) -> None:
    ProbedRuntime.answer = False
    with TestClient(create_app(probed, llm=ScriptedLLM([]))) as client:
        assert ProbedRuntime.asked.wait(20), "the probe never asked"
        assert "probed" not in client.get("/api/settings").json()["runtimes"]
        r = client.post("/api/agent/run", json={"goal": "x", "runtime": "probed"})
        assert r.status_code == 400
        assert r.json()["error"]["message"] == (
            "The probed runtime is not available on this server (the probed thing is switched off)."
        )


def test_the_configured_runtime_is_offered_before_any_probe(
    tmp_path: Path, probed: Settings
) -> None:
    ProbedRuntime.answer = False
    settings = make_settings(tmp_path, runtime="probed", runtime_modules=PROBED)
    app = create_app(settings, llm=ScriptedLLM([]))
    assert "probed" in app.state.runtimes_available  # as RUNTIME=docker always was


# ---- through the CLI ------------------------------------------------------------------------


def test_planact_run_takes_a_registered_runtime(
    tmp_path: Path,
    fake_model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in server_env(tmp_path, fake_model.base_url).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("RUNTIME_MODULES", TINY)
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    fake_model.script(
        {"stage": "planning", "content": plan_reply("List the files")},
        {"stage": "thinking", "content": run("ls -la") + finish("Listed.")},
    )
    code = cli.main(["run", "list files", "--runtime", "tiny", "--mode", "agent"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "tiny ran 'ls -la' in ." in out
    planning, thinking = fake_model.model.calls
    assert PLANNING_NOTE in system_prompt(planning["messages"])
    assert THINKING_NOTE in system_prompt(thinking["messages"])


def test_planact_run_refuses_an_unregistered_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    monkeypatch.setenv("RUNTIME_MODULES", TINY)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "x", "--runtime", "nope"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--runtime {{{','.join([*BUILTIN_NAMES, 'tiny'])}}}" in err and "invalid choice" in err
    monkeypatch.delenv("RUNTIME_MODULES")
    with pytest.raises(SystemExit):  # without it, no tiny runtime
        cli.main(["run", "x", "--runtime", "tiny"])
    assert f"--runtime {{{','.join(BUILTIN_NAMES)}}}" in capsys.readouterr().err
