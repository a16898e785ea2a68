"""Providers' prompt caches, simulated on the prompts a fake model receives (tokens counted
with tiktoken's o200k_base, which litellm ships: no download).

- OpenAI's rule (automatic): a prompt's longest token prefix shared with an earlier prompt
  is served from cache when it is at least 1,024 tokens, in steps of 128 beyond that.
- Anthropic's rule (explicit): a request caches the prefix up to each of its
  ``cache_control`` breakpoints (at least 1,024 tokens: Sonnet's minimum) and reads the
  longest cached prefix that ends at a breakpoint or at one of the 20 blocks before it;
  entries live 5 minutes from their last use. Tokens past the read up to the last
  breakpoint are written (billed at 1.25x), the rest are plain input.

``usage`` of each answers as that provider's API would report it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OPENAI_MIN = 1024
OPENAI_STEP = 128
ANTHROPIC_MIN = 1024
LOOKBACK = 20
LIFETIME = 300.0


def _encoding() -> Any:
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.origin is not None:  # litellm's bundled tokenizer files
        bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


_ENC: Any = None


def tokens(text: str) -> list[int]:
    global _ENC
    if _ENC is None:
        _ENC = _encoding()
    return list(_ENC.encode(text, disallowed_special=()))


def _text(content: Any) -> list[tuple[str, bool]]:
    """A message's content as (text, has a breakpoint) blocks."""
    if isinstance(content, str):
        return [(content, False)]
    blocks = []
    for block in content or []:
        if isinstance(block, dict):
            text = block.get("text")
            if text is None:
                text = json.dumps({k: v for k, v in block.items() if k != "cache_control"})
            blocks.append((str(text), bool(block.get("cache_control"))))
    return blocks


@dataclass
class Block:
    tokens: list[int]
    breakpoint: bool


def blocks_of(system: Any, messages: list[dict[str, Any]]) -> list[Block]:
    """The request as token blocks: the system prompt's, then each message's (its role
    counted with its first block)."""
    out: list[Block] = []
    if system:
        for text, mark in _text(system):
            out.append(Block(tokens("system\n" + text), mark))
    for message in messages:
        role = str(message.get("role", ""))
        for i, (text, mark) in enumerate(_text(message.get("content"))):
            out.append(Block(tokens((role + "\n" if i == 0 else "") + text), mark))
    return out


@dataclass
class Usage:
    input_tokens: int  # every input token
    cache_read: int
    cache_write: int


@dataclass
class OpenAICache:
    prompts: list[list[int]] = field(default_factory=list)

    def request(self, system: Any, messages: list[dict[str, Any]]) -> Usage:
        flat = [t for b in blocks_of(system, messages) for t in b.tokens]
        best = 0
        for earlier in self.prompts:
            n = 0
            limit = min(len(earlier), len(flat))
            while n < limit and earlier[n] == flat[n]:
                n += 1
            best = max(best, n)
        self.prompts.append(flat)
        cached = (
            0
            if best < OPENAI_MIN
            else OPENAI_MIN + (best - OPENAI_MIN) // OPENAI_STEP * OPENAI_STEP
        )
        return Usage(len(flat), cached, 0)


@dataclass
class AnthropicCache:
    entries: dict[str, float] = field(default_factory=dict)  # prefix hash: last used

    def request(
        self, system: Any, messages: list[dict[str, Any]], now: float | None = None
    ) -> Usage:
        now = time.monotonic() if now is None else now
        blocks = blocks_of(system, messages)
        hashes, sizes = [], []
        digest = hashlib.sha256()
        size = 0
        for block in blocks:
            digest.update(repr(block.tokens).encode())
            hashes.append(digest.copy().hexdigest())
            size += len(block.tokens)
            sizes.append(size)
        live = {h for h, used in self.entries.items() if now - used < LIFETIME}
        marks = [i for i, b in enumerate(blocks) if b.breakpoint]
        read, read_at = 0, -1
        for mark in marks:
            for j in range(mark, max(-1, mark - LOOKBACK), -1):
                if hashes[j] in live and sizes[j] > read:
                    read, read_at = sizes[j], j
                    break
        if read_at >= 0:
            self.entries[hashes[read_at]] = now
        written_to = read
        for mark in marks:
            if sizes[mark] >= ANTHROPIC_MIN:
                self.entries[hashes[mark]] = now
                written_to = max(written_to, sizes[mark])
        return Usage(size, read, written_to - read)
