"""Consumer-group benchmarks on a real cluster: three broker processes, one controller.

1. Commit throughput: one member of a Stable group sends OffsetCommit requests (one
   partition each, 32 in flight) to its coordinator; every commit is an acks=all append
   to an RF 3 `__consumer_offsets` partition. The reference, measured in the same run,
   is the same number of acks=all produce requests of one small record each to an RF 3
   topic (the path a commit takes after the coordinator's checks); the ratio shows
   what the coordinator adds.
2. Rebalance time: ten consumers (the real client, one Trio run) subscribe to a
   20-partition topic; times until all ten hold their first assignment (includes
   `group.initial.rebalance.delay.ms`, set to 0 here), until all eleven hold one after an
   eleventh joins, and until the remaining ten hold one after a member leaves.
Prints figures only; the cluster lives in a temp dir and is stopped by pid at the end.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time

import trio

from client.admin import NewTopic, open_admin
from client.connection import open_connection
from client.consumer import open_consumer
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch
from tools.cluster.launcher import LocalCluster

COMMITS = int(os.environ.get("BENCH_GROUP_COMMITS", "5000"))
IN_FLIGHT = 32
MEMBERS = 10


async def _find_coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    async with open_connection(host, int(port)) as conn:
        for _ in range(200):
            answer = await conn.request(m.FindCoordinatorRequest(key=group), timeout_s=10)
            if answer.error_code == ErrorCode.NONE:
                return answer.host, answer.port
            await trio.sleep(0.1)
    raise RuntimeError(f"no coordinator for {group}")


async def _pipelined(conn, requests, check) -> float:
    started = time.perf_counter()
    pending = iter(requests)

    async def worker() -> None:
        for request in pending:
            check(await conn.request(request, timeout_s=30))

    async with trio.open_nursery() as nursery:
        for _ in range(IN_FLIGHT):
            nursery.start_soon(worker)
    return time.perf_counter() - started


async def commit_throughput(bootstrap: str) -> tuple[float, float]:
    group = "bench-commits"
    host, port = await _find_coordinator(bootstrap, group)
    async with open_connection(host, port, client_id="bench") as conn:
        join = dict(
            group_id=group,
            session_timeout_ms=30_000,
            rebalance_timeout_ms=30_000,
            protocol_type="consumer",
            protocols=[m.JoinGroupProtocol(name="range", metadata=b"")],
        )
        first = await conn.request(m.JoinGroupRequest(member_id="", **join), timeout_s=30)
        joined = await conn.request(
            m.JoinGroupRequest(member_id=first.member_id, **join), timeout_s=30
        )
        member, generation = joined.member_id, joined.generation_id
        await conn.request(
            m.SyncGroupRequest(
                group_id=group, generation_id=generation, member_id=member, assignments=[]
            ),
            timeout_s=30,
        )

        def commit(i: int) -> m.OffsetCommitRequest:
            return m.OffsetCommitRequest(
                group_id=group,
                generation_id=generation,
                member_id=member,
                topics=[
                    m.OffsetCommitTopic(
                        name="commits",
                        partitions=[
                            m.OffsetCommitPartition(partition_index=i % 10, committed_offset=i)
                        ],
                    )
                ],
            )

        def committed(answer) -> None:
            code = answer.topics[0].partitions[0].error_code
            if code != ErrorCode.NONE:
                raise RuntimeError(f"commit failed: {ErrorCode(code).name}")

        took = await _pipelined(conn, (commit(i) for i in range(COMMITS)), committed)
    commits_per_s = COMMITS / took

    # Reference: acks=all produce requests of one 100-byte record to an RF 3 partition.
    async with open_admin(bootstrap) as admin:
        metadata = await admin.describe_topics(["commits"])
        leader = metadata[0].partitions[0].leader
        brokers = (await admin.describe_cluster()).brokers
    address = next(b for b in brokers if b.node_id == leader)
    batch = build_batch([Record(None, b"x" * 100, 0)])
    produce = m.ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topics=[
            m.ProduceTopic(
                name="commits", partitions=[m.ProducePartition(partition=0, records=batch)]
            )
        ],
    )

    def produced(answer) -> None:
        code = answer.topics[0].partitions[0].error_code
        if code != ErrorCode.NONE:
            raise RuntimeError(f"produce failed: {ErrorCode(code).name}")

    async with open_connection(address.host, address.port) as conn:
        took = await _pipelined(conn, (produce for _ in range(COMMITS)), produced)
    return commits_per_s, COMMITS / took


async def rebalance_times(bootstrap: str) -> tuple[float, float, float]:
    assigned_at: dict[int, float] = {}
    changed = trio.Event()

    def on_assigned(index: int):
        def record(partitions) -> None:
            assigned_at[index] = time.perf_counter()
            changed.set()

        return record

    async def wait_for(indexes: set[int], since: float) -> float:
        nonlocal changed
        while not all(assigned_at.get(i, 0) > since for i in indexes):
            changed = trio.Event()
            await changed.wait()
        return max(assigned_at[i] for i in indexes) - since

    stops: dict[int, trio.Event] = {}

    async def member(index: int, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        stops[index] = trio.Event()
        async with open_consumer(
            bootstrap,
            group_id="bench-rebalance",
            client_id=f"member-{index}",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        ) as consumer:
            consumer.subscribe(["rebalance"], on_assigned=on_assigned(index))
            task_status.started()
            while not stops[index].is_set():
                await consumer.poll(100)

    async with trio.open_nursery() as nursery:
        started = time.perf_counter()
        for i in range(MEMBERS):
            await nursery.start(member, i)
        formed = await wait_for(set(range(MEMBERS)), started)
        started = time.perf_counter()
        await nursery.start(member, MEMBERS)
        grown = await wait_for(set(range(MEMBERS + 1)), started)
        started = time.perf_counter()
        stops[0].set()
        shrunk = await wait_for(set(range(1, MEMBERS + 1)), started)
        for stop in stops.values():
            stop.set()
    return formed, grown, shrunk


def main() -> None:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as tmp:
        cluster = LocalCluster(
            tmp,
            brokers=3,
            controllers=1,
            base_port=None,
            metrics=False,
            broker_overrides={
                "offsets.topic.num.partitions": 3,
                "group.initial.rebalance.delay.ms": 0,
            },
        )
        try:
            cluster.up(timeout_s=90)
            bootstrap = cluster.state.bootstrap_servers

            async def topics() -> None:
                async with open_admin(bootstrap) as admin:
                    await admin.create_topics(
                        [NewTopic("commits", 10, 3), NewTopic("rebalance", 20, 3)]
                    )

            trio.run(topics)
            commits, produces = trio.run(commit_throughput, bootstrap)
            print(f"offset commits (1 partition each, {IN_FLIGHT} in flight, RF 3 acks=all):")
            print(f"  commits:              {commits:>9,.0f} /s")
            print(f"  reference produces:   {produces:>9,.0f} /s (1 record, acks=all, RF 3)")
            print(f"  commits / produces:   {commits / produces:9.2f}")
            formed, grown, shrunk = trio.run(rebalance_times, bootstrap)
            print(f"rebalance of a {MEMBERS}-member group (20 partitions, eager, range):")
            print(f"  {MEMBERS} members subscribe -> all assigned:      {formed * 1000:7.0f} ms")
            print(f"  an 11th member joins  -> all 11 reassigned:  {grown * 1000:7.0f} ms")
            print(f"  a member leaves       -> the other 10 reassigned: {shrunk * 1000:5.0f} ms")
        finally:
            cluster.down(timeout_s=20)


if __name__ == "__main__":
    main()
