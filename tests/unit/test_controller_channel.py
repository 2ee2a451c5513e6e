"""Request sending to brokers: in order, retried until answered, dropped on removal."""

from __future__ import annotations

import trio
import trio.testing

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from controller.channel import ControllerChannelManager
from controller.core.context import BrokerInfo
from server_common.network import serve_connection


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
