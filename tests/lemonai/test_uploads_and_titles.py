"""The LemonAI adapter's uploads and titles: names cut by bytes (never a 500 or a leftover
folder), unusable names and bodies a JSON 400, and the title rule planact's own API applies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from backend.api.names import clean_title
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from backend.uploads import cut_name
from tests.agent.scripts import finish, plan_reply
from tests.support.lemonai import create, lemon_client, stream_run

EMOJI = "\U0001f600"  # 4 bytes of UTF-8


def staging_of(settings: Settings) -> Path:
    return Path(settings.workspace_dir) / "user_1" / ".lemonai-uploads"


def raw_upload(client: TestClient, filename: str) -> Any:
    """A multipart body written by hand: the name reaches the server byte for byte."""
    b = "XyZzY"
    body = (
        f'--{b}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
        f"Content-Type: text/plain\r\n\r\nx\r\n--{b}--\r\n"
    ).encode()
    return client.post(
        "/lemonai/api/file/upload",
        content=body,
        headers={"content-type": f"multipart/form-data; boundary={b}"},
    )


def test_a_name_of_200_emoji_is_cut_to_255_bytes_and_reaches_the_workspace(
    settings: Settings,
) -> None:
    llm = ScriptedLLM([("planning", plan_reply("Read")), ("thinking", finish("read"))])
    with lemon_client(settings, llm) as client:
        up = client.post(
            "/lemonai/api/file/upload",
            files={"files": (EMOJI * 200 + ".csv", b"a,b\n", "text/csv")},
        )
        assert up.status_code == 200, up.text
        staged = up.json()["data"][0]
        name = staged["name"]
        assert len(name.encode()) <= 255 and name.endswith(".csv")
        assert name == EMOJI * 62 + ".csv"  # whole characters only: 248 + 4 bytes
        cid = create(client)
        stream_run(client, {"question": "q", "conversation_id": cid, "fileIds": [staged["id"]]})
        workspace = Path(settings.workspace_dir).resolve() / "user_1" / f"Conversation_{cid}"
        assert (workspace / "upload" / name).read_bytes() == b"a,b\n"


@pytest.mark.parametrize(
    "filename", ["a\x1bb.txt", "bell\x07.txt", "evil\u202etxt.exe", "zero\u200bwidth.txt"]
)
def test_an_unusable_upload_name_is_a_json_400_and_keeps_nothing(
    settings: Settings, filename: str
) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        resp = raw_upload(client, filename)
        assert resp.status_code == 400, resp.text
        body = resp.json()
        assert body["code"] == 400 and body["data"] is None and "control" in body["msg"]
        staging = staging_of(settings)
        assert not staging.exists() or not any(staging.iterdir())


def test_cut_name_never_splits_a_character_and_keeps_a_short_extension() -> None:
    assert cut_name("a" * 300) == "a" * 255
    assert cut_name("é" * 200) == "é" * 127  # 254 bytes: the 128th would pass 255
    assert cut_name("é" * 200 + ".tar.gz") == "é" * 126 + ".gz"  # 252 + 3 bytes
    assert cut_name("x." + "y" * 300) == ("x." + "y" * 300).encode()[:255].decode()
    assert cut_name("short.txt") == "short.txt"


# -- titles: one rule on both APIs ------------------------------------------------------


@pytest.mark.parametrize("bad", ["esc \x1b[31m red", "bell \x07", "rlo \u202egnp.exe", "x" * 201])
def test_a_title_planact_refuses_is_refused_by_the_lemonai_rename_too(
    settings: Settings, bad: str
) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        cid = create(client, "first goal")
        ours = client.patch(f"/api/conversations/{cid}", json={"title": bad})
        assert ours.status_code == 400 and "error" in ours.json()
        resp = client.put(f"/lemonai/api/conversation/{cid}", json={"title": bad})
        assert resp.status_code == 400, resp.text
        body = resp.json()
        assert body["code"] == 400 and body["data"] is None and body["msg"]
        kept = client.get(f"/lemonai/api/conversation/{cid}").json()["data"]["title"]
        assert kept == "first goal"


def test_titles_both_apis_accept_are_stored_alike(settings: Settings) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        cid = create(client)
        for title in ("  Family \u200d\U0001f468\u200d\U0001f469 trip  ", "Q3\tnumbers", "y" * 200):
            resp = client.put(f"/lemonai/api/conversation/{cid}", json={"title": title})
            assert resp.status_code == 200, resp.text
            assert resp.json()["data"]["title"] == clean_title(title)
            ours = client.patch(f"/api/conversations/{cid}", json={"title": title})
            assert ours.status_code == 200 and ours.json()["title"] == clean_title(title)
        # "" asks LemonAI's automatic title: the one kept is unchanged
        resp = client.put(f"/lemonai/api/conversation/{cid}", json={"title": ""})
        assert resp.status_code == 200 and resp.json()["data"]["title"] == "y" * 200
        assert client.put(f"/lemonai/api/conversation/{cid}", json={"title": 5}).status_code == 400


def test_a_conversation_created_from_a_message_gets_a_clean_title(settings: Settings) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        cid = create(client, "make \x1b[31mred\x07 \u202etext")
        title = client.get(f"/lemonai/api/conversation/{cid}").json()["data"]["title"]
        assert title == "make [31mred text"
        assert clean_title(title) == title


def test_a_body_that_is_not_a_readable_form_is_a_json_400(settings: Settings) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        resp = client.post(
            "/lemonai/api/file/upload",
            content=b"--nope\r\nnot a part",
            headers={"content-type": "multipart/form-data"},  # no boundary
        )
        assert resp.status_code == 400, resp.text
        assert resp.json()["code"] == 400 and resp.json()["data"] is None
        staging = staging_of(settings)
        assert not staging.exists() or not any(staging.iterdir())
