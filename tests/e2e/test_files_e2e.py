"""Black-box: every file the real server lists downloads, whatever its name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import running_server
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

# names a command can make that a URL must carry: a newline, a carriage return, a control
# character, a literal percent escape, a question mark, a hash
MAKE = (
    "printf 1 > \"$(printf 'line\\nbreak.txt')\"; printf 2 > \"$(printf 'cr\\rname')\"; "
    "printf 3 > \"$(printf 'ctl\\001.txt')\"; printf 4 > 'pct %41 ?q #h.txt'; "
    "mkdir \"$(printf 'dir\\nx')\"; printf 5 > \"$(printf 'dir\\nx')/in.txt\""
)


def test_every_listed_file_downloads(tmp_path: Path, fake_model: FakeModelServer) -> None:
    fake_model.script(
        {"stage": "route", "content": '{"task_type": "code_generation", "needs_tools": true}'},
        {"stage": "planning", "content": plan_reply("Make files")},
        {"stage": "thinking", "content": run(MAKE) + finish("made them")},
        {"stage": "summary", "content": "Made the files."},
    )
    with running_server(tmp_path, fake_model.base_url) as server:
        _messages, end, headers = server.run({"goal": "Please make the files"})
        assert end["status"] == "completed"
        cid = headers["x-conversation-id"]
        with server.client() as client:
            listed = client.get(f"/api/conversations/{cid}/files").json()
            names = {f["filepath"]: f for f in listed}
            assert set(names) == {
                "line\nbreak.txt",
                "cr\rname",
                "ctl\x01.txt",
                "pct %41 ?q #h.txt",
                "dir\nx/in.txt",
            }
            for name, entry in names.items():
                got = client.get(entry["url"])
                assert got.status_code == 200, (name, got.text)
                assert got.content.decode() in "12345"
