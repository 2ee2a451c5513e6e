"""CPU of one acks=all RF 3 cycle on the leader and on a follower, without sockets.

The end-to-end latency at 10,000 records/s is a chain of hops through three broker
processes on a shared machine, so its percentiles are noisy; the Python work of each
hop is not. This times the real code of each hop, in one process, with no network and
no scheduler, so a change to the handlers, the replica manager, the purgatories or the
wire codec shows up as a stable number:

- leader: a Produce request of `RECORDS` records is decoded and handled (the two
  followers' parked fetches complete and their responses are encoded); each follower's
  next Fetch is decoded and handled (the second moves the HW: the produce answer and
  the consumer's parked fetch are encoded); the consumer's next Fetch parks. That is
  `RequestHandlers` over a `ReplicaManager` and a log in a temporary directory, with the
  broker's request metrics, and the native wire codec on both sides;
- follower: its fetch response is decoded, appended (`FollowerFetch.apply_fetch`) and
  the next fetch request built and encoded, as `ReplicaFetcher._one_round` does.

Each figure is the best of several repeats of `CYCLES` cycles, in microseconds. What
it leaves out (sockets, the connection tasks, Trio's scheduling) is most of a real
broker's CPU: compare with `tributary perf e2e` and the brokers' CPU time.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import types
from pathlib import Path

from broker.broker_metrics import register_broker_metrics
from broker.core.follower_fetch import FetchPhase
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.metadata_cache import MetadataCache
from broker.core.partition import PartitionStateUpdate
from broker.core.replica_manager import ReplicaManager, ReplicationConfig
from broker.handlers import RequestHandlers
from broker.handlers.metadata_changes import MetadataChanges
from broker.handlers.topics import TopicDefaults
from broker.tasks.fetcher import ReplicaFetcher, _fetched
from broker.zookeeper.registration import BrokerIdentity
from client.protocol import messages as m
from client.protocol.connection import ClientConnection
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition
from server_common.metrics import MetricsRegistry
from server_common.network import NativeWire, Reply

RECORDS = 25  # per batch: about what a 10k records/s e2e run batches per round trip
CYCLES = 1_000
REPEATS = 9
NOW = 1_700_000_000_000
TP = TopicPartition("e", 0)
STATE = PartitionStateUpdate("e", 0, 1, 1, 0, (1, 2, 3), 0, (1, 2, 3))


def _run_handler(coroutine):
    """Run a handler that never suspends (Produce and Fetch don't) to its answer."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("the handler suspended")


def _best_us(cycle, warmup: int = 300) -> float:
    for i in range(warmup):
        cycle(i)
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for i in range(CYCLES):
            cycle(i)
        best = min(best, (time.perf_counter() - started) / CYCLES)
    return best * 1e6


def leader_cycle_us(directory: Path) -> float:
    config = LogConfig()
    manager = LogManager.open(directory / "leader", config, now_ms=NOW)
    rm = ReplicaManager(
        1, manager, ReplicationConfig(), log_config_for=lambda topic: config, now_ms=NOW
    )
    rm.become_leader_or_follower(NOW, 1, [STATE])
    cache = MetadataCache()
    observe = register_broker_metrics(MetricsRegistry(), rm, cache)
    handlers = RequestHandlers(
        rm,
        cache,
        None,
        identity=BrokerIdentity(1),
        topic_configs=None,
        metadata_changes=MetadataChanges(),
        topic_defaults=TopicDefaults(),
        default_log_config=config,
        clock=lambda: NOW,
        log_dir=str(directory),
    )
    peers = ("producer", "follower-2", "follower-3", "consumer")
    servers = {peer: NativeWire(max_frame_bytes=1 << 26) for peer in peers}
    clients = {peer: ClientConnection() for peer in peers}
    answers: dict[str, tuple] = {}

    def send(peer: str, request) -> None:
        _, frame = clients[peer].send_request(request)
        servers[peer].receive_data(frame)
        header, decoded = servers[peer].next_request()
        started = time.perf_counter()
        answers[peer] = (header, _run_handler(handlers.handle(header, decoded)), started)

    def answered(peer: str) -> bool:
        header, answer, started = answers[peer]
        if isinstance(answer, Reply):
            if not answer.done:
                return False
            answer = answer._value
        frame = servers[peer].encode_response(header, answer)
        observe(header.api_key, time.perf_counter() - started, 0, len(frame))
        clients[peer].receive_data(frame)
        clients[peer].next_response()
        del answers[peer]
        return True

    def fetch(peer: str, replica_id: int, offset: int) -> None:
        partition = m.FetchPartition(
            partition=0, current_leader_epoch=0, fetch_offset=offset, partition_max_bytes=1 << 20
        )
        send(
            peer,
            m.FetchRequest(
                replica_id=replica_id,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=10 << 20,
                topics=[m.FetchTopic(topic="e", partitions=[partition])],
            ),
        )

    batches = [build_batch([Record(None, b"v" * 100, NOW)] * RECORDS) for _ in range(4)]
    log_end = [0]
    fetch("follower-2", 2, 0)
    fetch("follower-3", 3, 0)
    fetch("consumer", -1, 0)

    def cycle(i: int) -> None:
        partition = m.ProducePartition(partition=0, records=batches[i % 4])
        send(
            "producer",
            m.ProduceRequest(
                acks=-1,
                timeout_ms=30_000,
                topics=[m.ProduceTopic(name="e", partitions=[partition])],
            ),
        )
        assert answered("follower-2") and answered("follower-3")
        log_end[0] += RECORDS
        fetch("follower-2", 2, log_end[0])
        fetch("follower-3", 3, log_end[0])
        assert answered("producer") and answered("consumer"), "the HW did not move"
        fetch("consumer", -1, log_end[0])

    try:
        return _best_us(cycle)
    finally:
        manager.close()


def follower_cycle_us(directory: Path) -> float:
    config = LogConfig()
    manager = LogManager.open(directory / "follower", config, now_ms=NOW)
    rm = ReplicaManager(
        2, manager, ReplicationConfig(), log_config_for=lambda topic: config, now_ms=NOW
    )
    rm.become_leader_or_follower(NOW, 1, [STATE])
    rm.followers.states[TP].phase = FetchPhase.FETCHING  # truncation is not timed here
    fetcher = ReplicaFetcher(types.SimpleNamespace(broker_id=2, replica_manager=rm), 1)
    client = ClientConnection()
    leader = NativeWire(max_frame_bytes=1 << 26)
    total = 300 + CYCLES * REPEATS
    # The leader's answers, encoded beforehand: batch i holds offsets from i * RECORDS.
    frames = []
    for i in range(total):
        records = build_batch(
            [Record(None, b"v" * 100, NOW)] * RECORDS, base_offset=i * RECORDS, leader_epoch=0
        )
        partition = m.FetchResponsePartition(
            partition=0,
            error_code=0,
            high_watermark=i * RECORDS,
            last_stable_offset=i * RECORDS,
            log_start_offset=0,
            records=records,
        )
        response = m.FetchResponse(
            throttle_time_ms=0,
            error_code=0,
            topics=[m.FetchResponseTopic(topic="e", partitions=[partition])],
        )
        frames.append(leader.send_response(i, response))  # correlation ids run 0, 1, ...

    def cycle(i: int) -> None:
        rm.followers.truncation_requests(1, NOW)
        fetching = rm.followers.fetch_request(1, NOW)
        correlation_id, _ = client.send_request(fetcher._fetch_request(fetching))
        client.receive_data(frames[correlation_id])
        _, response = client.next_response()
        rm.followers.apply_fetch(1, fetching, _fetched(response), NOW)

    try:
        return _best_us(cycle)
    finally:
        manager.close()


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="bench-replication-cycle-"))
    try:
        leader = leader_cycle_us(directory)
        follower = follower_cycle_us(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"acks=all RF 3 cycle of {RECORDS} records, best of {REPEATS} x {CYCLES:,} cycles:")
    print(f"leader CPU per cycle (produce, 2 follower fetches, consumer fetch): {leader:.0f} us")
    print(f"follower CPU per cycle (fetch response applied, next fetch built):  {follower:.0f} us")


if __name__ == "__main__":
    main()
