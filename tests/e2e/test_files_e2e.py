"""Black-box: every file the real server lists downloads, whatever its name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.cluster import follow, start_json
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


def test_a_run_that_starts_while_an_upload_is_sent_gets_the_upload_refused(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """The "no active run" check was made when the upload began: a run started while the
    body was on its way found the files written into its workspace mid-run."""
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Hold")},
        {"stage": "thinking", "content": finish("held"), "hold": "upload"},
    )
    b = "planactboundary"
    head = (
        f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="mid.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    with running_server(tmp_path, fake_model.base_url) as server:
        with server.client() as c:
            cid = c.post("/api/conversations", json={}).json()["conversation_id"]
        started: list[httpx.Response] = []

        def body() -> Iterator[bytes]:
            yield head + b"x" * 4096
            started.append(start_json(server, {"goal": "write code", "conversation_id": cid}))
            yield b"y" * 4096 + f"\r\n--{b}--\r\n".encode()

        with server.client() as c:
            resp = c.post(
                f"/api/conversations/{cid}/files",
                content=body(),
                headers={"content-type": f"multipart/form-data; boundary={b}"},
            )
        assert started[0].status_code == 202, started[0].text
        assert resp.status_code == 409, resp.text
        ws = tmp_path / "workspace" / "user_1" / f"Conversation_{cid}"
        assert not (ws / "mid.txt").exists()
        fake_model.release("upload")
        _, end = follow(server, started[0].json()["run_id"])
        assert end is not None and end["status"] == "completed"
        with server.client() as c:  # nothing was lost: it can be sent again now
            again = c.post(
                f"/api/conversations/{cid}/files",
                files=[("file", ("mid.txt", b"x", "text/plain"))],
            )
            assert again.status_code == 201, again.text
