"""Request sending to brokers: in order, retried until answered (a refused login too),
dropped on removal."""

from __future__ import annotations

import trio
import trio.testing

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.security.secure_connector import SecurityConfig, secure_connector
from controller.channel import ControllerChannelManager
from controller.core.context import BrokerInfo
from server_common.network import serve_connection
from server_common.security.authenticator import Authenticator
from server_common.security.credential_cache import ScramCredentialCache
from server_common.security.sasl import SaslServerFactory
from server_common.security.sasl_gate import SaslGate


def metadata(marker: int) -> m.UpdateMetadataRequest:
    return m.UpdateMetadataRequest(
        controller_id=1, controller_epoch=marker, partition_states=[], live_brokers=[]
    )


class Broker:
    """Answers UpdateMetadata; the first request it ever gets is never answered."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])

        async def handle(header, request):
            self.seen.append(request.controller_epoch)
            if len(self.seen) == 1:
                await trio.sleep_forever()  # a stuck broker: the controller times out
            return m.UpdateMetadataResponse(error_code=ErrorCode.NONE)

        async def serve(stream):
            await serve_connection(stream, handle, max_frame_bytes=1 << 20, max_queued=4)

        await trio.serve_listeners(serve, listeners)


async def test_requests_go_out_in_order_and_are_retried_after_a_timeout(nursery):
    broker = Broker()
    port = await nursery.start(broker.run)
    channel = ControllerChannelManager(nursery, controller_id=1, request_timeout_s=0.3)
    channel.add_broker(BrokerInfo(5, "127.0.0.1", port, epoch=1))
    answered: list[tuple[int, int]] = []
    done = trio.Event()

    def on_response(marker):
        def callback(response):
            answered.append((marker, response.error_code))
            if len(answered) == 3:
                done.set()

        return callback

    for marker in (1, 2, 3):
        assert channel.send(5, metadata(marker), on_response(marker))
    with trio.fail_after(10):
        await done.wait()
    assert answered == [(1, 0), (2, 0), (3, 0)]
    assert broker.seen == [1, 1, 2, 3]  # the first attempt timed out and was resent
    channel.close()


async def test_removing_a_broker_drops_its_queue(nursery):
    channel = ControllerChannelManager(nursery, controller_id=1, request_timeout_s=1)
    with trio.socket.socket() as unused:  # a port nobody listens on
        await unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    channel.add_broker(BrokerInfo(5, "127.0.0.1", port, epoch=1))
    results = []
    for marker in (1, 2):
        channel.send(5, metadata(marker), results.append)
    await trio.sleep(0.2)  # it keeps reconnecting meanwhile
    assert results == []
    channel.remove_broker(5)
    await trio.testing.wait_all_tasks_blocked()  # the cancelled sender unwinds
    assert results == [None, None]  # the one being delivered and the queued one
    assert channel.send(5, metadata(3), results.append) is False
    assert results == [None, None, None]


async def test_a_refused_login_is_retried_until_the_broker_accepts_it(nursery):
    """A broker's SASL listener (the real gate and PLAIN) refuses the controller's login
    until its user is added: the request is not dropped, it goes through afterwards."""
    users: dict[str, str] = {}
    attempts: list[int] = []

    async def handle(header, request):
        return m.UpdateMetadataResponse(error_code=ErrorCode.NONE)

    async def serve(stream):
        attempts.append(1)
        if len(attempts) == 2:
            users["controller"] = "secret"  # the first login was refused, this one is not
        factory = SaslServerFactory(["PLAIN"], users, ScramCredentialCache())
        gate = SaslGate(handle, Authenticator(factory, failed_delay_ms=1))
        await serve_connection(stream, gate, max_frame_bytes=1 << 20, max_queued=4)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    nursery.start_soon(trio.serve_listeners, serve, listeners)
    security = SecurityConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="controller",
        sasl_plain_password="secret",
    )
    channel = ControllerChannelManager(
        nursery, controller_id=1, request_timeout_s=5, connector=secure_connector(security)
    )
    port = listeners[0].socket.getsockname()[1]
    channel.add_broker(BrokerInfo(5, "127.0.0.1", port, epoch=1))
    answered = trio.Event()
    responses = []

    def on_response(response):
        responses.append(response)
        answered.set()

    channel.send(5, metadata(1), on_response)
    with trio.fail_after(10):
        await answered.wait()
    assert responses[0] is not None and responses[0].error_code == ErrorCode.NONE
    assert len(attempts) == 2
    channel.close()
