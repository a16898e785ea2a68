"""`planact serve` with every SQL statement and transaction counted (bench/bench_cpu.py).

  python bench/counted_serve.py --counts FILE [planact serve arguments]

SQLAlchemy events on every Engine count the statements the server executes (by verb, with
the rows they wrote) and the transactions it commits or rolls back; SIGUSR1 writes the
counts so far to FILE as JSON. The counting costs CPU, so the benchmark measures CPU on a
plain `planact serve` and counts on this one.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

COUNTS: Counter[str] = Counter()
LOCK = threading.Lock()


def _statement(
    conn: Connection,
    cursor: Any,
    statement: str,
    parameters: Any,
    context: Any,
    executemany: bool,
) -> None:
    verb = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else "?"
    rows = cursor.rowcount if verb in ("INSERT", "UPDATE", "DELETE") else 0
    with LOCK:
        COUNTS[f"statements {verb}"] += 1
        COUNTS["statements"] += 1
        COUNTS["sql: " + " ".join(statement.split())[:110]] += 1
        if rows > 0:
            COUNTS[f"rows {verb}"] += rows
            COUNTS["rows written"] += rows


def _commit(conn: Connection) -> None:
    with LOCK:
        COUNTS["commits"] += 1


def _rollback(conn: Connection) -> None:
    with LOCK:
        COUNTS["rollbacks"] += 1


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "--counts":
        print(__doc__, file=sys.stderr)
        return 2
    out, rest = Path(args[1]), args[2:]
    event.listen(Engine, "after_cursor_execute", _statement)
    event.listen(Engine, "commit", _commit)
    event.listen(Engine, "rollback", _rollback)

    def dump(_signum: int, _frame: FrameType | None) -> None:
        with LOCK:
            snapshot = dict(COUNTS)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(snapshot))
        tmp.replace(out)

    signal.signal(signal.SIGUSR1, dump)
    from backend.cli.main import main as planact

    return planact(["serve", *rest])


if __name__ == "__main__":
    sys.exit(main())
