"""The MCP SDK (its pydantic types alone take about half a second to import) is loaded when
the first server is connected: a process with no MCP server never pays for it."""

from __future__ import annotations

import json
import subprocess
import sys

CHECK = """
import json, sys
import backend.app, backend.cli.main, backend.runs.worker
from backend.tools.mcp import McpManager
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))))
"""


def test_serving_without_mcp_servers_does_not_import_the_sdk() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
