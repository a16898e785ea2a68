"""The way into a preview's service: run INSIDE the sandbox (its network namespace), with the
sandbox's own python3 (standard library only, ``python3 -I -S forwarder.py DIR PORT``).

It listens on two Unix sockets in ``DIR`` (a folder the server made and bound into the
sandbox): ``s``, whose every connection it answers with a TCP connection to
``127.0.0.1:PORT`` made inside the namespace and handed over as a descriptor (``SCM_RIGHTS``,
with the byte ``1``; ``0`` and no descriptor when nothing accepts on the port), and
``probe``, which answers ``1`` when something accepts connections on the port, else ``0``.
The server connects to those sockets and talks to the app over the socket it is handed (no
byte passes through this process); the sandbox gets nothing of the host's network. It ends
when the process that started it (the service's shell, or what that exec'd) ends.
"""

import contextlib
import os
import socket
import sys
import threading
import time


def hand(conn: socket.socket, port: int) -> None:
    """Connect to the app and hand the connected socket over ``conn``."""
    try:
        up = socket.create_connection(("127.0.0.1", port))
    except OSError:
        with contextlib.suppress(OSError):
            conn.sendall(b"0")
        conn.close()
        return
    try:
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socket.send_fds(conn, [b"1"], [up.fileno()])
    except OSError:
        pass
    finally:
        up.close()
        conn.close()


def probe(conn: socket.socket, port: int) -> None:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        answer = b"1"
    except OSError:
        answer = b"0"
    with contextlib.suppress(OSError):
        conn.sendall(answer)
    conn.close()


def listen(path: str) -> socket.socket:
    with contextlib.suppress(OSError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(256)
    return sock


def accept_loop(sock: socket.socket, handle, port: int) -> None:  # type: ignore[no-untyped-def]
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=handle, args=(conn, port), daemon=True).start()


def follow_parent() -> None:
    """End with the service: when the shell (or what it exec'd) that started the forwarder
    is gone, the forwarder's parent changes."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


def main() -> None:
    folder, port = sys.argv[1], int(sys.argv[2])
    threading.Thread(target=follow_parent, daemon=True).start()
    probes = listen(os.path.join(folder, "probe"))
    data = listen(os.path.join(folder, "s"))
    threading.Thread(target=accept_loop, args=(probes, probe, port), daemon=True).start()
    accept_loop(data, hand, port)


if __name__ == "__main__":
    main()
