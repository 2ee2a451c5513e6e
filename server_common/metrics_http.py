"""A tiny HTTP/1.1 endpoint serving `GET /metrics` in Prometheus text format.

How it works: one Trio listener; each connection reads the request head (bounded),
answers once and closes. Anything but GET /metrics gets 404; a malformed request gets
400. Enough for Prometheus and `curl`; not a general web server.
"""

from __future__ import annotations

import logging

import trio

from server_common.metrics import MetricsRegistry

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192  # a scrape request is a few hundred bytes


async def serve_metrics(
    registry: MetricsRegistry, host: str, port: int, *, task_status=trio.TASK_STATUS_IGNORED
) -> None:
    listeners = await trio.open_tcp_listeners(port, host=host)
    task_status.started(listeners[0].socket.getsockname()[1])

    async def handle(stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(10):
                head = b""
                while b"\r\n\r\n" not in head and len(head) < MAX_HEAD_BYTES:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    head += chunk
                request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
                parts = request_line.split()
                if len(parts) < 2:
                    status, body, ctype = "400 Bad Request", b"bad request\n", "text/plain"
                elif parts[0] == "GET" and parts[1].split("?")[0] in ("/metrics", "/"):
                    body = registry.render().encode()
                    status, ctype = "200 OK", "text/plain; version=0.0.4; charset=utf-8"
                else:
                    status, body, ctype = "404 Not Found", b"try /metrics\n", "text/plain"
                header = (
                    f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode()
                await stream.send_all(header + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    await trio.serve_listeners(handle, listeners)
