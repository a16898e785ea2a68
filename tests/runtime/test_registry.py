"""The runtime registry: one list of runtimes that settings, API, CLI, probe, prompts and UI
read. A runtime defined here and registered is offered, accepted and described to the model
with nothing else changed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from starlette.testclient import TestClient

from backend import cli
from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from backend.runtime import make_runtime, registry
from backend.runtime.base import BaseRuntime, CommandOutput, OutputCallback, PromptNote, hand_output
from backend.runtime.docker import DockerRuntime
from backend.runtime.local import LocalRuntime
from backend.runtime.names import BUILTIN
from backend.runtime.sandboxing import SandboxConfigError, local_runtime_for_process
from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.sse_client import collect
from tests.support.settings import make_settings

PLANNING_NOTE = "inside the tiny test runtime"
THINKING_NOTE = "the tiny test runtime; commands are only echoed"


class TinyRuntime(BaseRuntime):
    """Runs nothing: answers every command with a line naming itself."""

    name = "tiny"
    prompt_note = PromptNote(planning=PLANNING_NOTE, thinking=THINKING_NOTE)

    async def _run_command(
        self, command: str, workspace: Path, cwd: str, on_output: OutputCallback | None = None
    ) -> CommandOutput:
        out = f"tiny ran {command!r} in {cwd}\n".encode()
        hand_output(on_output, "stdout", out)
        return CommandOutput(exit_code=0, stdout=out, stderr=b"")


class ProbedRuntime(TinyRuntime):
    """Needs something outside the server: offered only once the probe says so."""

    name = "probed"
    always_available = False
    unavailable_note = "the probed thing is switched off"
    answer: ClassVar[bool] = True
    asked: ClassVar[threading.Event] = threading.Event()

    async def available(self) -> bool:
        ProbedRuntime.asked.set()
        return self.answer


@pytest.fixture
def tiny() -> Iterator[type[TinyRuntime]]:
    registry.register(TinyRuntime)
    yield TinyRuntime
    registry.unregister("tiny")


@pytest.fixture
def probed() -> Iterator[type[ProbedRuntime]]:
    ProbedRuntime.asked.clear()
    ProbedRuntime.answer = True
    registry.register(ProbedRuntime)
    yield ProbedRuntime
    registry.unregister("probed")


SCRIPT: list[tuple[str, Any]] = [
    ("planning", plan_reply("List the files")),
    ("thinking", run("ls -la") + finish("Listed.")),
]


def system_prompt(messages: list[dict[str, Any]]) -> str:
    return str(messages[0]["content"])


# ---- the registry itself -------------------------------------------------------------------


def test_builtin_runtimes_load_by_name_in_their_order() -> None:
    assert registry.names()[: len(BUILTIN)] == list(BUILTIN)
    assert registry.get("local") is LocalRuntime
    assert registry.get("docker") is DockerRuntime
    with pytest.raises(registry.UnknownRuntime, match=f"one of {', '.join(BUILTIN)}"):
        registry.get("nope")


def test_a_registered_runtime_is_listed_until_unregistered(tiny: type[TinyRuntime]) -> None:
    assert registry.names()[-1] == "tiny"
    assert registry.get("tiny") is tiny
    assert registry.register(tiny) is tiny  # again: harmless
    registry.unregister("tiny")
    assert "tiny" not in registry.names()
    registry.unregister("docker")  # built-in ones stay
    assert "docker" in registry.names()


def test_a_taken_name_is_refused(tiny: type[TinyRuntime]) -> None:
    class Impostor(TinyRuntime):
        pass

    with pytest.raises(ValueError, match="'tiny' is already registered"):
        registry.register(Impostor)

    class Local(TinyRuntime):
        name = "local"

    with pytest.raises(ValueError, match="'local' is already registered"):
        registry.register(Local)


def test_a_process_starts_with_registered_runtimes_only(
    tmp_path: Path, tiny: type[TinyRuntime]
) -> None:
    assert local_runtime_for_process(make_settings(tmp_path, runtime="tiny"))
    with pytest.raises(
        SandboxConfigError, match="'nope' is not a runtime: one of local, docker, tiny"
    ):
        local_runtime_for_process(make_settings(tmp_path, runtime="nope"))


def test_make_runtime_builds_the_named_class_from_settings(
    tmp_path: Path, tiny: type[TinyRuntime]
) -> None:
    settings = make_settings(tmp_path, runtime="tiny", terminal_timeout=7)
    made = make_runtime(settings)
    assert isinstance(made, TinyRuntime) and made.terminal_timeout == 7
    assert isinstance(make_runtime(settings, "local"), LocalRuntime)


# ---- through the API ------------------------------------------------------------------------


def test_a_registered_runtime_is_offered_accepted_and_described_to_the_model(
    settings: Settings, tiny: type[TinyRuntime]
) -> None:
    llm = ScriptedLLM(list(SCRIPT))
    with TestClient(create_app(settings, llm=llm)) as client:
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


def test_an_unknown_runtime_is_refused_with_the_registered_names(
    settings: Settings, tiny: type[TinyRuntime]
) -> None:
    llm = ScriptedLLM([])
    with TestClient(create_app(settings, llm=llm)) as client:
        r = client.post("/api/agent/run", json={"goal": "x", "runtime": "nope"})
        assert r.status_code == 400
        assert r.json()["error"]["message"] == "'runtime' must be one of local, docker, tiny."
        assert client.get("/api/conversations").json() == []
    assert llm.calls == []


def test_a_probed_runtime_is_offered_once_the_probe_says_it_works(
    settings: Settings, probed: type[ProbedRuntime]
) -> None:
    with TestClient(create_app(settings, llm=ScriptedLLM([]))) as client:
        wait_for(
            lambda: "probed" in client.get("/api/settings").json()["runtimes"],
            what="the probe to offer the runtime",
        )
        assert client.get("/api/health").json()["runtimes"][0] == "local"


def test_a_probed_runtime_that_is_not_available_is_refused_with_its_note(
    settings: Settings, probed: type[ProbedRuntime]
) -> None:
    probed.answer = False
    with TestClient(create_app(settings, llm=ScriptedLLM([]))) as client:
        assert probed.asked.wait(20), "the probe never asked"
        assert "probed" not in client.get("/api/settings").json()["runtimes"]
        r = client.post("/api/agent/run", json={"goal": "x", "runtime": "probed"})
        assert r.status_code == 400
        assert r.json()["error"]["message"] == (
            "The probed runtime is not available on this server (the probed thing is switched off)."
        )


def test_the_configured_runtime_is_offered_before_any_probe(
    tmp_path: Path, probed: type[ProbedRuntime]
) -> None:
    probed.answer = False
    settings = make_settings(tmp_path, runtime="probed")
    app = create_app(settings, llm=ScriptedLLM([]))
    assert "probed" in app.state.runtimes_available  # as RUNTIME=docker always was


# ---- through the CLI ------------------------------------------------------------------------


def test_planact_run_takes_a_registered_runtime(
    tmp_path: Path,
    fake_model: FakeModelServer,
    tiny: type[TinyRuntime],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in server_env(tmp_path, fake_model.base_url).items():
        monkeypatch.setenv(key, value)
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
    capsys: pytest.CaptureFixture[str], tiny: type[TinyRuntime]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "x", "--runtime", "nope"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--runtime {local,docker,tiny}" in err and "invalid choice" in err
