"""MCP_SERVERS_FILE: the common `mcpServers` JSON shape, validated at start.

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@scope/server"], "env": {"K": "v"}},
        "search": {"url": "https://example.org/mcp", "headers": {"Authorization": "Bearer …"}}
    }}

A stdio server has `command` (and optional `args`, `env`, `cwd`); a streamable HTTP server
has `url` (and optional `headers`). Every mistake is a McpConfigError naming the server.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_MAX = 1 * 2**20  # bytes of MCP_SERVERS_FILE read at most (a server list is small)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
STDIO_KEYS = {"command", "args", "env", "cwd", "type"}
HTTP_KEYS = {"url", "headers", "type"}
# "type" is accepted as written by other clients; it must agree with the keys
TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http"}


class McpConfigError(ValueError):
    """MCP_SERVERS_FILE cannot be used; the message says where and why."""


@dataclass(frozen=True)
class StdioServer:
    name: str
    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True)
class HttpServer:
    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)


ServerSpec = StdioServer | HttpServer


def load_servers(path: Path | str | None) -> dict[str, ServerSpec]:
    """Read and validate the file; no file configured means no servers."""
    if path is None or str(path).strip() == "":
        return {}
    p = Path(path)
    text = _read_bounded(p)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"MCP_SERVERS_FILE {p}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg})."
        ) from None
    except RecursionError:  # arrays or objects nested thousands deep
        raise McpConfigError(
            f"MCP_SERVERS_FILE {p}: nested too deeply to be a list of servers."
        ) from None
    return parse_servers(data, source=f"MCP_SERVERS_FILE {p}")


def _read_bounded(p: Path) -> str:
    """The file's text, read to at most FILE_MAX bytes: a device (/dev/zero), a directory
    or a file too large is refused with why, never read without end."""
    try:
        with p.open("rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                raise McpConfigError(
                    f"MCP_SERVERS_FILE {p}: not a regular file; point it at a JSON file."
                )
            raw = f.read(FILE_MAX + 1)
    except OSError as exc:
        raise McpConfigError(
            f"MCP_SERVERS_FILE {p}: cannot read it ({exc.strerror or exc})."
        ) from None
    if len(raw) > FILE_MAX:
        raise McpConfigError(
            f"MCP_SERVERS_FILE {p}: larger than {FILE_MAX // 2**20} MiB; a server list is "
            "a small JSON file."
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise McpConfigError(f"MCP_SERVERS_FILE {p}: not UTF-8 text (byte {exc.start}).") from None


def parse_servers(data: Any, source: str = "MCP servers") -> dict[str, ServerSpec]:
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise McpConfigError(
            f'{source}: expected an object {{"mcpServers": {{"name": {{...}}}}}} at the top.'
        )
    servers: dict[str, ServerSpec] = {}
    for name, raw in data["mcpServers"].items():
        servers[name] = _server(name, raw, source)
    return servers


def _server(name: str, raw: Any, source: str) -> ServerSpec:
    where = f"{source}: server {name!r}"
    if not NAME_RE.match(name) or "__" in name:
        raise McpConfigError(
            f"{where}: a name is letters, digits, '_', '.', '-' without '__' (tools are "
            "called as server__tool)."
        )
    if not isinstance(raw, dict):
        raise McpConfigError(f"{where}: expected an object with 'command' or 'url'.")
    has_command, has_url = "command" in raw, "url" in raw
    if has_command and has_url:
        raise McpConfigError(
            f"{where}: has both 'command' (stdio) and 'url' (streamable HTTP); keep one."
        )
    if not has_command and not has_url:
        raise McpConfigError(
            f"{where}: needs 'command' (a stdio server) or 'url' (a streamable HTTP server)."
        )
    kind = "stdio" if has_command else "http"
    declared = raw.get("type")
    if declared is not None and TYPES.get(str(declared)) != kind:
        raise McpConfigError(
            f"{where}: 'type' {declared!r} does not match its "
            f"{'command' if has_command else 'url'}; the SSE transport is not supported."
        )
    allowed = STDIO_KEYS if has_command else HTTP_KEYS
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise McpConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)} for a {kind} server "
            f"(allowed: {', '.join(sorted(allowed))})."
        )
    if has_command:
        command = raw["command"]
        if not isinstance(command, str) or not command.strip():
            raise McpConfigError(f"{where}: 'command' must be a non-empty string.")
        args = raw.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise McpConfigError(f"{where}: 'args' must be a list of strings.")
        cwd = raw.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise McpConfigError(f"{where}: 'cwd' must be a string.")
        return StdioServer(name, command, list(args), _str_map(raw.get("env"), "env", where), cwd)
    url = raw["url"]
    if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
        raise McpConfigError(f"{where}: 'url' must be an http:// or https:// URL.")
    return HttpServer(name, url, _str_map(raw.get("headers"), "headers", where))


def _str_map(raw: Any, key: str, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise McpConfigError(f"{where}: {key!r} must be an object of strings.")
    return dict(raw)
