"""A real inference server for the real-model tests: llama.cpp's server (compiled into the
PyPI wheel `xllamacpp`, a portable CPU build) serving a GGUF over its OpenAI-compatible
HTTP API on 127.0.0.1.

Run: python serve_model.py GGUF PORT THREADS   (with `xllamacpp` importable, e.g. through
PYTHONPATH=<the folder scripts/ci.d/45-real-model.sh installs it into>). Prints
`LISTEN <url>` once the model is loaded, then serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import signal
import sys


def main() -> int:
    import xllamacpp as xlc  # type: ignore[import-not-found]

    gguf, port, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    params = xlc.CommonParams()
    params.model.path = gguf
    params.n_ctx = 8192
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.cpuparams.n_threads = threads
    server = xlc.Server(params)
    print(f"LISTEN {server.listening_address}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    return 0


if __name__ == "__main__":
    sys.exit(main())
