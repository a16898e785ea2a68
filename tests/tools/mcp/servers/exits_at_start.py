"""An MCP server that cannot start: it prints why to stderr and exits."""

import sys

print("starting the exits-at-start server", file=sys.stderr, flush=True)
print("fatal: TOKEN is not set", file=sys.stderr, flush=True)
sys.exit(3)
