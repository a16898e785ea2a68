"""What a person approves is what runs (docs/api.md "Runs that wait for a person").

An approval message carries the digest of the action it asks about: the SHA-256 of the
canonical JSON of ``{"action_type", "params"}`` (keys sorted, no spaces, ASCII escapes, so
the same action always gives the same bytes, whatever its text holds). An answer may name
the digest it was shown (a mismatch is refused, nothing changes), and the resumed run checks
the action it is about to run against the digest of the approval before running it.

Its cost is one canonical JSON and one hash of the action's text, when asking and before
running: measured here 3 µs for a short command, 4 ms for a 40,000-line file and 8 ms for
the largest reply a model may send (MAX_REPLY_CHARS, 1 MB), next to a person's answer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from backend.messages.payloads import ApprovalRequest, read_items


def canonical(action_type: str, params: Mapping[str, Any]) -> bytes:
    """The bytes the digest is taken of (documented in docs/api.md)."""
    doc = {"action_type": action_type, "params": dict(params)}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def action_digest(action_type: str, params: Mapping[str, Any]) -> str:
    """``sha256:<64 hex digits>`` of :func:`canonical`."""
    return "sha256:" + hashlib.sha256(canonical(action_type, params)).hexdigest()


def approval_of(meta_json: Iterable[object]) -> ApprovalRequest | None:
    """The action an approval message asks about (its meta.json's ApprovalRequest, as
    backend/agent/asking.py writes it), or None: an item that is no ApprovalRequest (another
    kind's, a newer writer's) is passed over."""
    found = read_items(meta_json, ApprovalRequest)
    return found[0] if found else None


def digest_of(meta_json: Iterable[object]) -> str:
    """The digest an approval message carries (its :func:`approval_of`), or ""."""
    request = approval_of(meta_json)
    return request.digest if request else ""
