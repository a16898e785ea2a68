"""An MCP server that never answers the handshake (it reads nothing, writes nothing)."""

import os
import sys
import time

print(f"hanging at start, pid {os.getpid()}", file=sys.stderr, flush=True)
with open(sys.argv[1], "w") if len(sys.argv) > 1 else open(os.devnull, "w") as f:
    f.write(str(os.getpid()))
while True:
    time.sleep(3600)
