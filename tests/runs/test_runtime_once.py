"""The docker probe asks for the runtime from a thread while the first run asks from the
loop: the manager makes each runtime once, labelled with its instance id, so shutdown closes
every sandbox it started (two instances once existed and one leaked its container)."""

from __future__ import annotations

import threading
from pathlib import Path

from backend.agent.specialists import BUILTIN
from backend.llm.testing import ScriptedLLM
from backend.messages.bus import Bus
from backend.runs import RunManager
from backend.store.repo import Store
from tests.support.settings import make_settings


def test_a_runtime_asked_from_many_threads_at_once_is_made_once(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    manager = RunManager(settings, Store(settings.database_url), Bus(), ScriptedLLM([]), BUILTIN)
    start = threading.Barrier(8)
    got: list[object] = []

    def ask() -> None:
        start.wait()
        got.append(manager.runtime("docker"))  # builds a docker client lazily: slow

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(got) == 8
    assert len({id(r) for r in got}) == 1
    assert manager.loaded_runtimes() == [got[0]]
    assert getattr(got[0], "owner", None) == manager.instance_id
