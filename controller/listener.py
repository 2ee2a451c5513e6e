"""The controller's own small listener: it answers ControlledShutdown, nothing else.

How it works: a listener bound through the controller's `Transport` (TCP, or a test
cluster's memory network; its bound port goes into /controller) serving each connection
with `server_common.network.serve_connection`. A ControlledShutdownRequest becomes a
`ControlledShutdown` event on the controller's queue with a `Reply` that the event
handler fills; the connection writes the answer when it is ready. ApiVersions is
answered directly; any other API gets UNSUPPORTED_VERSION. Request memory is bounded
by a small pool and idle connections are closed, as on a broker's client listeners.
With a `ListenerSecurity` (the controller's `security.inter.broker.protocol`) it uses TLS
and/or SASL as a broker's listener does: brokers log in before anything is served.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from client.protocol import messages as m
from client.protocol.codec import RequestHeader
from client.protocol.errors import ErrorCode
from controller.events import ControlledShutdown, EventQueue
from server_common.memory_pool import MemoryPool
from server_common.network import TCP, Reply, Transport, error_answer, serve_connection
from server_common.security.authenticator import Authenticator
from server_common.security.listener_config import PLAINTEXT_LISTENER, ListenerSecurity
from server_common.security.sasl import SaslServerFactory
from server_common.security.sasl_gate import SaslGate
from server_common.security.tls import server_context

log = logging.getLogger(__name__)

# ControlledShutdown requests are tiny; 1 MiB leaves room without letting a confused
# client make us buffer much.
MAX_FRAME_BYTES = 1 << 20
# A broker sends one ControlledShutdown at a time.
MAX_QUEUED_PER_CONNECTION = 4
# Request memory for all connections at once (`server_common.memory_pool`): brokers'
# requests are tiny and never wait for it; it stops many connections announcing 1 MiB
# frames from costing the controller a MiB each.
MEMORY_POOL_BYTES = 8 * MAX_FRAME_BYTES
# Kafka's connections.max.idle.ms default: brokers reconnect when they need to.
IDLE_TIMEOUT_S = 600.0


async def serve_controller_listener(
    queue: EventQueue,
    host: str,
    port: int,
    transport: Transport = TCP,
    *,
    security: ListenerSecurity | None = None,
    sasl: SaslServerFactory | None = None,
    task_status=trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ControlledShutdown on (host, port); with `security`, over TLS and/or SASL
    as a broker's listener of that protocol (`sasl`: its mechanisms)."""
    security = security or PLAINTEXT_LISTENER
    tls = server_context(security.tls) if security.tls is not None else None
    bound = await transport.bind(host, port)
    task_status.started(bound.port)
    pool = MemoryPool(MEMORY_POOL_BYTES)

    async def handle(header: RequestHeader, request: Any) -> Any:
        if isinstance(request, m.ControlledShutdownRequest):
            reply = Reply()
            queue.put(ControlledShutdown(request, reply))
            return reply
        if isinstance(request, m.ApiVersionsRequest):
            return m.api_versions_response()
        return error_answer(
            ErrorCode.UNSUPPORTED_VERSION, "the controller only serves ControlledShutdown"
        )

    async def serve(stream: trio.SocketStream) -> None:
        authenticator = None
        if sasl is not None:
            authenticator = Authenticator(sasl, security.failed_authentication_delay_ms)
        await serve_connection(
            stream,
            SaslGate(handle, authenticator),
            max_frame_bytes=MAX_FRAME_BYTES,
            max_queued=MAX_QUEUED_PER_CONNECTION,
            pool=pool,
            idle_timeout_s=IDLE_TIMEOUT_S,
            tls=tls,
            tls_handshake_timeout_s=security.handshake_timeout_ms / 1000,
            authenticated=None if authenticator is None else authenticator.is_complete,
            max_frame_bytes_before_auth=64 * 1024,
        )

    await trio.serve_listeners(serve, list(bound.listeners))  # it takes a list
