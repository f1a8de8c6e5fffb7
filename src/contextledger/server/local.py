"""Serve an ASGI app on a free loopback port in a background thread (examples, tests).

The socket listens before the server thread starts, so clients may connect at once: their
connections queue until uvicorn accepts them (no polling, no sleeps).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn  # at import: a program without the server extra fails on its import line

__all__ = ["serve_in_thread"]


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Serve ``app`` on ``127.0.0.1:<free port>`` until the block ends; yields the base
    URL (``http://127.0.0.1:<port>``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
