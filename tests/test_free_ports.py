"""The ports tests start their servers on: two asked for close together are never the same
one (a server and its preview origin on one port: the second fails to bind)."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

from tests.support import ports
from tests.support.ports import free_port


def test_a_port_is_not_handed_out_again_among_the_next_thousands() -> None:
    # the kernel hands a closed port out again: among this many, some would repeat
    got = [free_port() for _ in range(3000)]
    assert len(set(got)) == len(got)


def test_a_long_suite_never_runs_out_of_ports() -> None:
    # past RECENT, ports handed out long ago may come back: the supply never ends
    got = [free_port() for _ in range(3 * ports.RECENT)]
    window = got[-ports.RECENT :]
    assert len(set(window)) == len(window)


def test_ports_asked_for_from_several_threads_are_all_different() -> None:
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: free_port(), range(800)))
    assert len(set(got)) == len(got)


def test_a_port_handed_out_is_free_to_bind() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert s.getsockname()[1] == port
