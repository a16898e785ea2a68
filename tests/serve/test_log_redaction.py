"""Credential query parameters never reach a log line (backend/logs.py)."""

from __future__ import annotations

import io
import logging

from backend.logs import RedactQuerySecrets, redact, uvicorn_log_config


def test_credential_query_values_are_redacted_and_the_rest_kept() -> None:
    line = "GET /api/files/c/a.txt?access_token=s3cr3t&after=4 HTTP/1.1"
    assert redact(line) == "GET /api/files/c/a.txt?access_token=[redacted]&after=4 HTTP/1.1"
    assert redact("/x?node_token=a&api_key=b&key=c&password=d&q=token") == (
        "/x?node_token=[redacted]&api_key=[redacted]&key=[redacted]&password=[redacted]&q=token"
    )
    assert redact("tokens=3 and monkey=1, no query") == "tokens=3 and monkey=1, no query"


def test_a_handler_with_the_filter_writes_no_secret_whatever_the_record_shape() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactQuerySecrets())
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning('%s - "%s %s" %d', "1.2.3.4", "GET", "/e?access_token=aaa", 200)
        logger.warning("fetched %(url)s", {"url": "/e?token=bbb"})
        logger.warning("plain /e?access_token=ccc")
    finally:
        logger.removeHandler(handler)
    text = out.getvalue()
    assert "aaa" not in text and "bbb" not in text and "ccc" not in text
    assert text.count("[redacted]") == 3 and '"GET /e?access_token=[redacted]" 200' in text


def test_every_uvicorn_handler_redacts() -> None:
    config = uvicorn_log_config()
    assert config["handlers"]
    for handler in config["handlers"].values():
        assert "redact_query_secrets" in handler["filters"]


def test_every_spelling_a_server_decodes_to_a_credential_is_redacted() -> None:
    """A query name is percent-decoded before it is read (``access%5Ftoken`` is
    ``access_token`` and authenticates): the raw spelling was logged in clear."""
    spellings = ("access%5Ftoken", "access%5ftoken", "%61ccess_token", "access%255Ftoken")
    for name in spellings:
        line = f"GET /api/files/c/a.txt?{name}=s3cr3t&after=4 HTTP/1.1"
        assert redact(line) == f"GET /api/files/c/a.txt?{name}=[redacted]&after=4 HTTP/1.1"
    assert redact("/x?api%5Fkey=a&pass%77ord=b&q=%74oken") == (
        "/x?api%5Fkey=[redacted]&pass%77ord=[redacted]&q=%74oken"
    )


def test_a_value_is_redacted_up_to_the_next_ampersand_as_the_server_splits_it() -> None:
    # the server splits a query on "&" only: "a;b" is the whole token
    assert redact("/x?access_token=a;b&after=4") == "/x?access_token=[redacted]&after=4"
    assert redact("/x?after=4;access_token=a") == "/x?after=4;access_token=[redacted]"
