"""A throttled connection (server_common/network.py `CONNECTION_THROTTLE`, what the quota
gate sets for a client over its quota): its answer is held and nothing more is read or
served from it until the throttle time is up, while other connections go on. On
in-memory streams and trio's autojump clock (virtual time)."""

from __future__ import annotations

import trio

from client.protocol.framing import encode_frame
from server_common.network import CONNECTION_THROTTLE
from tests.unit.test_connection_bounds import _answer, _serve


async def test_a_throttled_connection_is_muted_and_its_answer_held(autojump_clock):
    handled: list[tuple[bytes, float]] = []

    async def handle(header, frame):
        handled.append((bytes(frame), trio.current_time()))
        if frame == b"over":
            throttle = CONNECTION_THROTTLE.get()
            assert throttle is not None
            throttle.throttle(500)  # ms
        return len(frame)

    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        throttled = await _serve(nursery, handle)
        other = await _serve(nursery, handle)
        await throttled.send_all(encode_frame(b"over") + encode_frame(b"next"))
        await other.send_all(encode_frame(b"other"))
        assert await _answer(other) == 5
        other_answered = trio.current_time()
        assert await _answer(throttled) == 4
        throttled_answered = trio.current_time()
        assert await _answer(throttled) == 4
        nursery.cancel_scope.cancel()

    when = {frame: at - start for frame, at in handled}
    assert other_answered - start < 0.5  # another connection is not held
    assert throttled_answered - start >= 0.5  # the throttled answer waited its time
    assert when[b"next"] >= 0.5  # and the next request was not served meanwhile
    assert when[b"over"] < 0.5
