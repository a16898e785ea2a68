"""The way into a preview's service: run INSIDE the sandbox (its network namespace), with the
sandbox's own python3 (standard library only, ``python3 -I -S forwarder.py DIR PORT``).

It listens on two Unix sockets in ``DIR`` (a folder the server made and bound into the
sandbox): ``s``, whose every connection it joins to ``127.0.0.1:PORT`` inside the namespace,
and ``probe``, which answers ``1`` when something accepts connections on the port, else ``0``.
The server connects to those sockets; the sandbox gets nothing of the host's network.
"""

import contextlib
import os
import socket
import sys
import threading

CHUNK = 262144


def pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def join(conn: socket.socket, port: int) -> None:
    try:
        up = socket.create_connection(("127.0.0.1", port))
    except OSError:
        conn.close()
        return
    up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=pipe, args=(up, conn), daemon=True)
    back.start()
    pipe(conn, up)
    back.join()
    conn.close()
    up.close()


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


def main() -> None:
    folder, port = sys.argv[1], int(sys.argv[2])
    probes = listen(os.path.join(folder, "probe"))
    data = listen(os.path.join(folder, "s"))
    threading.Thread(target=accept_loop, args=(probes, probe, port), daemon=True).start()
    accept_loop(data, join, port)


if __name__ == "__main__":
    main()
