"""The admin client's per-broker requests: the cluster's brokers, and their log dirs.

How it works: `describe_cluster` reads the cluster's metadata fresh (brokers and the
controller). DescribeLogDirs and VerifyLogDirs go to every broker asked for (all live
ones by default) at once (`_ask_each_broker`): each broker maps to its answer, or to the
`TributaryError` that stood in the way (not alive, connection failed), so one silent
broker does not hide the others. VerifyLogDirs scans and repairs a broker's logs, which
takes a while: it waits for the repairs' timeout and an hour beyond.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from client.admin.base import AdminBase, error_or_none
from client.admin.results import ClusterDescription, LogDirDescription, ReplicaLogInfo
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition


class BrokerAdmin(AdminBase):
    """The brokers and their log dirs (a mixin of `client.admin.Admin`)."""

    async def describe_cluster(self) -> ClusterDescription:
        cluster = await self._fresh_cluster()
        return ClusterDescription(
            cluster.cluster_id,
            cluster.controller_id,
            sorted(cluster.brokers.values()),
        )

    async def describe_log_dirs(
        self, broker_ids: Iterable[int] | None = None
    ) -> dict[int, list[LogDirDescription] | TributaryError]:
        """Each broker's log dirs with per-partition size, LEO, HW, leadership. A broker
        that cannot be reached maps to its connection error."""
        answers = await self._ask_each_broker(
            broker_ids, m.DescribeLogDirsRequest(topics=None), self.request_timeout_ms / 1000
        )
        out: dict[int, list[LogDirDescription] | TributaryError] = {}
        for broker_id, response in answers.items():
            if isinstance(response, TributaryError):
                out[broker_id] = response
                continue
            out[broker_id] = [
                LogDirDescription(
                    result.log_dir,
                    error_or_none(result.error_code),
                    {
                        TopicPartition(t.name, p.partition_index): ReplicaLogInfo(
                            p.partition_size,
                            p.offset_lag,
                            p.log_start_offset,
                            p.log_end_offset,
                            p.high_watermark,
                            p.is_leader,
                            p.leader_epoch,
                        )
                        for t in result.topics
                        for p in t.partitions
                    },
                )
                for result in response.results
            ]
        return out

    async def verify_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        topics: Iterable[str] | None = None,
        *,
        repair_timeout_ms: float = 60_000,
    ) -> dict[int, m.VerifyLogDirsResponse | TributaryError]:
        """An on-demand scrub on each broker (Tributary's VerifyLogDirs): every batch of
        its logs (of `topics`) CRC-checked, damaged ranges repaired from an in-sync
        replica, waiting up to `repair_timeout_ms`. A broker that cannot be reached maps
        to its error."""
        request = m.VerifyLogDirsRequest(
            topics=None if topics is None else sorted(set(topics)),
            timeout_ms=int(repair_timeout_ms),
        )
        # The scan of a big log dir takes a while: no request timeout beyond the repairs'.
        timeout_s = self.request_timeout_ms / 1000 + repair_timeout_ms / 1000 + 3600
        return await self._ask_each_broker(broker_ids, request, timeout_s)

    async def _ask_each_broker(
        self, broker_ids: Iterable[int] | None, request, timeout_s: float
    ) -> dict[int, Any]:
        """`request` to each broker (all live ones by default), concurrently: broker id ->
        its response, or the TributaryError that stood in the way."""
        cluster = await self._fresh_cluster()
        ids = sorted(cluster.brokers) if broker_ids is None else list(broker_ids)
        out: dict[int, Any] = {}

        async def ask(broker_id: int) -> None:
            broker = cluster.broker(broker_id)
            if broker is None:
                out[broker_id] = TributaryError(
                    ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not alive"
                )
                return
            try:
                out[broker_id] = await self._pool.request(
                    *broker.address, request, timeout_s=timeout_s
                )
            except TributaryError as exc:
                out[broker_id] = exc

        async with trio.open_nursery() as nursery:
            for broker_id in ids:
                nursery.start_soon(ask, broker_id)
        return {broker_id: out[broker_id] for broker_id in ids}
