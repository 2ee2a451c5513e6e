"""Synthetic broker data for the Spark tests and benchmark, written with the real log store.

`write_replicas` lays out `<root>/broker-N/data/<topic>-<partition>/` for every broker with
the real `Log` API (so segments, indexes and checkpoints are what a broker writes), the
same batches on every replica, and `meta.properties` plus the three offset checkpoints in
each log dir. It returns the records as the store holds them (read back through
`Log.read`), which is what the data source must return. `write_events`/`write_metrics`
write small `events.jsonl`, `controller-events.jsonl` and `metrics.jsonl` files with a
known story: an ISR shrink and expand and a leader change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.core.log import Log, LogConfig, OffsetCheckpointFile
from client.protocol.records import (
    Codec,
    DecodedRecord,
    Record,
    build_batch,
    build_kafka_batch,
    decode_batches,
)
from client.protocol.types import TopicPartition

CODECS = (Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD)
SMALL_SEGMENTS = LogConfig(segment_bytes=2048, index_interval_bytes=256)
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
LATENCY_BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1]


def log_dir_of(root: Path, broker: int) -> Path:
    return root / f"broker-{broker}" / "data"


def make_batches(
    tp: TopicPartition, count: int, per_batch: int, *, start_ts: int = T0, value_size: int = 40
) -> list[bytes]:
    """`count` batches of `per_batch` records, cycling through every codec, every second
    one in Kafka's payload format (as a Kafka client writes it); records carry distinct
    keys, values, timestamps and, every third batch, a header."""
    batches = []
    for i in range(count):
        records = [
            Record(
                f"{tp.topic}-{tp.partition}-k{i}-{j}".encode() if j % 4 else None,
                (f"v{i}-{j}-".encode() * value_size)[:value_size],
                start_ts + i * 1_000 + j,
                (("trace", f"t{i}".encode()),) if i % 3 == 0 else (),
            )
            for j in range(per_batch)
        ]
        build = build_kafka_batch if i % 2 else build_batch
        batches.append(build(records, codec=CODECS[i % len(CODECS)]))
    return batches


def read_back(log: Log) -> list[DecodedRecord]:
    """Every record the store holds, through its own read path."""
    out: list[DecodedRecord] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = decode_batches(log.read(offset, 1 << 20).records)
        out.extend(r for r in fetched if r.offset >= offset)
        offset = fetched[-1].offset + 1
    return out


def open_log(root: Path, broker: int, tp: TopicPartition, config: LogConfig = SMALL_SEGMENTS):
    return Log.open(log_dir_of(root, broker) / f"{tp.topic}-{tp.partition}", config, now_ms=0)


def write_meta(log_dir: Path, broker: int) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "meta.properties").write_text(f"version=0\nbroker.id={broker}\n")


def write_checkpoints(
    log_dir: Path,
    *,
    high_watermarks: dict[TopicPartition, int],
    log_starts: dict[TopicPartition, int] | None = None,
) -> None:
    OffsetCheckpointFile(log_dir / "replication-offset-checkpoint").write(high_watermarks)
    OffsetCheckpointFile(log_dir / "log-start-offset-checkpoint").write(
        log_starts or {tp: 0 for tp in high_watermarks}
    )
    OffsetCheckpointFile(log_dir / "recovery-point-offset-checkpoint").write(high_watermarks)


@dataclass
class Replicas:
    root: Path
    brokers: tuple[int, ...]
    records: dict[TopicPartition, list[DecodedRecord]]  # as the store holds them
    log_bytes: dict[TopicPartition, int]  # bytes of one replica's segments


def write_replicas(
    root: Path,
    partitions: dict[TopicPartition, Sequence[bytes]],
    *,
    brokers: Iterable[int] = (1, 2, 3),
    leader_epoch: int = 0,
    config: LogConfig = SMALL_SEGMENTS,
) -> Replicas:
    """The same batches on every broker's replica; checkpoints say HW = LEO."""
    brokers = tuple(brokers)
    records: dict[TopicPartition, list[DecodedRecord]] = {}
    log_bytes: dict[TopicPartition, int] = {}
    for broker in brokers:
        log_dir = log_dir_of(root, broker)
        write_meta(log_dir, broker)
        hws = {}
        for tp, batches in partitions.items():
            log = open_log(root, broker, tp, config)
            for batch in batches:
                log.append_as_leader(batch, leader_epoch, now_ms=0)
            records[tp] = read_back(log)
            log_bytes[tp] = log.size_in_bytes
            hws[tp] = log.log_end_offset
            log.close()
        write_checkpoints(log_dir, high_watermarks=hws)
    return Replicas(root, brokers, records, log_bytes)


# ----------------------------------------------------------------------- events and metrics


def _write_lines(path: Path, entries: Iterable[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for entry in entries:
            out.write(json.dumps(entry, separators=(",", ":")) + "\n")


def write_events(root: Path, topic: str = "orders") -> None:
    """A story on a 3-broker cluster, partitions 0 (leader 1) and 1 (leader 2):

    - T0: both partitions get their first leaders, ISR [1,2,3] / [2,3,1];
    - T0+10s: broker 1 shrinks orders-0's ISR to [1,2] (broker 3 lagging);
    - T0+20s: broker 2 dies; the controller elects broker 3 for orders-1 (epoch 1) and
      removes 2 from orders-0's ISR; broker 3 becomes leader;
    - T0+40s: broker 1 expands orders-0's ISR back to [1,3];
    - the last line of broker 1's file is torn (killed mid-write).
    """
    common = {"topic": topic}
    _write_lines(
        log_dir_of(root, 1) / "events.jsonl",
        [
            {"ts": T0, "broker": 1, "event": "became_leader", **common, "partition": 0,
             "leader_epoch": 0, "isr": [1, 2, 3], "replicas": [1, 2, 3], "was_leader": False,
             "log_end_offset": 0, "high_watermark": 0},
            {"ts": T0 + 10_000, "broker": 1, "event": "isr_shrink", **common, "partition": 0,
             "old_isr": [1, 2, 3], "new_isr": [1, 2], "replicas": [1, 2, 3],
             "leader_epoch": 0, "high_watermark": 40, "log_end_offset": 45},
            {"ts": T0 + 40_000, "broker": 1, "event": "isr_expand", **common, "partition": 0,
             "old_isr": [1], "new_isr": [1, 3], "replicas": [1, 2, 3],
             "leader_epoch": 1, "high_watermark": 60, "log_end_offset": 60},
        ],
    )  # fmt: skip
    with (log_dir_of(root, 1) / "events.jsonl").open("a") as out:
        out.write('{"ts": 17000000')  # torn
    _write_lines(
        log_dir_of(root, 2) / "events.jsonl",
        [
            {"ts": T0 + 5, "broker": 2, "event": "became_leader", **common, "partition": 1,
             "leader_epoch": 0, "isr": [2, 3, 1], "replicas": [2, 3, 1], "was_leader": False,
             "log_end_offset": 0, "high_watermark": 0},
        ],
    )  # fmt: skip
    _write_lines(
        log_dir_of(root, 3) / "events.jsonl",
        [
            {"ts": T0 + 20_050, "broker": 3, "event": "became_leader", **common, "partition": 1,
             "leader_epoch": 1, "isr": [3, 1], "replicas": [2, 3, 1], "was_leader": False,
             "log_end_offset": 50, "high_watermark": 50},
            {"ts": T0 + 21_000, "broker": 3, "event": "truncation", **common, "partition": 0,
             "from_offset": 48, "to_offset": 45, "reason": "leader epoch"},
        ],
    )  # fmt: skip
    controller = root / "controller-1001" / "data" / "controller-events.jsonl"
    _write_lines(
        controller,
        [
            {"ts": T0 - 100, "controller": 1001, "epoch": 1, "event": "controller_elected"},
            {"ts": T0 - 50, "controller": 1001, "epoch": 1, "event": "leader_change", **common,
             "partition": 0, "old_leader": None, "new_leader": 1, "leader_epoch": 0,
             "old_isr": None, "isr": [1, 2, 3], "reason": "new_partition", "unclean": False},
            {"ts": T0 - 50, "controller": 1001, "epoch": 1, "event": "leader_change", **common,
             "partition": 1, "old_leader": None, "new_leader": 2, "leader_epoch": 0,
             "old_isr": None, "isr": [2, 3, 1], "reason": "new_partition", "unclean": False},
            {"ts": T0 + 20_000, "controller": 1001, "epoch": 1, "event": "broker_down",
             "broker": 2},
            {"ts": T0 + 20_010, "controller": 1001, "epoch": 1, "event": "leader_change",
             **common, "partition": 1, "old_leader": 2, "new_leader": 3, "leader_epoch": 1,
             "old_isr": [2, 3, 1], "isr": [3, 1], "reason": "offline_election",
             "unclean": False},
            {"ts": T0 + 20_010, "controller": 1001, "epoch": 1, "event": "isr_change", **common,
             "partition": 0, "old_leader": 1, "new_leader": 1, "leader_epoch": 1,
             "old_isr": [1, 2], "isr": [1], "reason": "isr_removal", "unclean": False},
        ],
    )  # fmt: skip


def _latency(request: str, buckets: list[int], total_s: float) -> dict:
    count = sum(buckets)
    return {
        "request": request,
        "count": count,
        "sum": total_s,
        "p50": None,
        "p99": None,
        "le": LATENCY_BOUNDS,
        "buckets": buckets,
    }


def write_metrics(root: Path, brokers: Iterable[int] = (1, 2, 3), snapshots: int = 4) -> None:
    """Snapshots every 5 s per broker. Produce latency: each interval adds 90 requests in
    the 1 ms bucket and 10 in the 50 ms one (p50 1 ms, p99 50 ms); Fetch: 20 in 0.5 ms."""
    for broker in brokers:
        lines = []
        for i in range(1, snapshots + 1):
            produce = [0, 90 * i, 0, 0, 0, 0, 10 * i, 0]
            fetch = [20 * i, 0, 0, 0, 0, 0, 0, 0]
            lines.append(
                {
                    "ts": T0 + i * 5_000,
                    "broker": broker,
                    "under_replicated_partitions": 1 if i == 2 else 0,
                    "leader_count": 1,
                    "isr_shrinks_total": 1,
                    "purgatory_size": [{"delayed_operation": "Produce", "value": 0}],
                    "log_end_offset": [{"topic": "orders", "partition": "0", "value": 10 * i}],
                    "requests_total": [{"request": "Produce", "value": 100 * i}],
                    "request_latency_seconds": [
                        _latency("Produce", produce, 0.59 * i),
                        _latency("Fetch", fetch, 0.01 * i),
                    ],
                }
            )
        _write_lines(log_dir_of(root, broker) / "metrics.jsonl", lines)


CONTROLLER_A, CONTROLLER_B = 1001, 1002


def failure_story(topic: str = "orders") -> tuple[list[dict], list[dict]]:
    """(broker event rows, controller event rows) of a run with a kill, a pause and a
    controller failover on 3 brokers; partitions 0 (leader 1) and 1 (leader 2), RF 3:

    - T0+10s broker 2 is killed: controller 1001 declares it down, elects 3 for
      orders-1 and drops 2 from orders-0's ISR; T0+30s it is back; ISRs full at T0+34s.
    - T0+50s broker 3 is paused: broker 1 drops it from orders-0's ISR (not answering);
      T0+56s its ZooKeeper session expires (down; 1 leads orders-1); T0+70s it resumes
      (writes session_lost), T0+70.5s it is up again; ISRs full at T0+74s.
    - T0+90s controller 1001 is killed (writes nothing); T0+96s 1002 is elected.
    - The last event is at T0+100s.
    """
    t = {"topic": topic}
    brokers = [
        {"ts": T0, "broker": 1, "event": "became_leader", **t, "partition": 0,
         "leader_epoch": 0, "isr": [1, 2, 3], "replicas": [1, 2, 3], "was_leader": False},
        {"ts": T0 + 5, "broker": 2, "event": "became_leader", **t, "partition": 1,
         "leader_epoch": 0, "isr": [2, 3, 1], "replicas": [2, 3, 1], "was_leader": False},
        {"ts": T0 + 10_050, "broker": 3, "event": "became_leader", **t, "partition": 1,
         "leader_epoch": 1, "isr": [3, 1], "replicas": [2, 3, 1], "was_leader": False},
        {"ts": T0 + 33_000, "broker": 1, "event": "isr_expand", **t, "partition": 0,
         "old_isr": [1, 3], "new_isr": [1, 3, 2], "replicas": [1, 2, 3], "leader_epoch": 1},
        {"ts": T0 + 34_000, "broker": 3, "event": "isr_expand", **t, "partition": 1,
         "old_isr": [3, 1], "new_isr": [3, 1, 2], "replicas": [2, 3, 1], "leader_epoch": 1},
        {"ts": T0 + 50_000, "broker": 1, "event": "isr_shrink", **t, "partition": 0,
         "old_isr": [1, 3, 2], "new_isr": [1, 2], "replicas": [1, 2, 3], "leader_epoch": 1},
        {"ts": T0 + 56_050, "broker": 1, "event": "became_leader", **t, "partition": 1,
         "leader_epoch": 2, "isr": [1, 2], "replicas": [2, 3, 1], "was_leader": False},
        {"ts": T0 + 70_000, "broker": 3, "event": "session_lost"},
        {"ts": T0 + 73_000, "broker": 1, "event": "isr_expand", **t, "partition": 0,
         "old_isr": [1, 2], "new_isr": [1, 2, 3], "replicas": [1, 2, 3], "leader_epoch": 1},
        {"ts": T0 + 74_000, "broker": 1, "event": "isr_expand", **t, "partition": 1,
         "old_isr": [1, 2], "new_isr": [1, 2, 3], "replicas": [2, 3, 1], "leader_epoch": 2},
        {"ts": T0 + 100_000, "broker": 1, "event": "became_leader", **t, "partition": 0,
         "leader_epoch": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3], "was_leader": True},
    ]  # fmt: skip
    a = {"controller": CONTROLLER_A, "epoch": 1}
    controllers = [
        {"ts": T0 - 100, **a, "event": "controller_elected"},
        {"ts": T0 - 50, **a, "event": "leader_change", **t, "partition": 0, "old_leader": None,
         "new_leader": 1, "leader_epoch": 0, "old_isr": None, "isr": [1, 2, 3],
         "reason": "new_partition", "unclean": False},
        {"ts": T0 - 50, **a, "event": "leader_change", **t, "partition": 1, "old_leader": None,
         "new_leader": 2, "leader_epoch": 0, "old_isr": None, "isr": [2, 3, 1],
         "reason": "new_partition", "unclean": False},
        {"ts": T0 + 10_000, **a, "event": "broker_down", "broker": 2},
        {"ts": T0 + 10_010, **a, "event": "leader_change", **t, "partition": 1, "old_leader": 2,
         "new_leader": 3, "leader_epoch": 1, "old_isr": [2, 3, 1], "isr": [3, 1],
         "reason": "offline_election", "unclean": False},
        {"ts": T0 + 10_010, **a, "event": "isr_change", **t, "partition": 0, "old_leader": 1,
         "new_leader": 1, "leader_epoch": 1, "old_isr": [1, 2, 3], "isr": [1, 3],
         "reason": "isr_removal", "unclean": False},
        {"ts": T0 + 30_000, **a, "event": "broker_up", "broker": 2, "broker_epoch": 7},
        {"ts": T0 + 56_000, **a, "event": "broker_down", "broker": 3},
        {"ts": T0 + 56_010, **a, "event": "leader_change", **t, "partition": 1, "old_leader": 3,
         "new_leader": 1, "leader_epoch": 2, "old_isr": [3, 1, 2], "isr": [1, 2],
         "reason": "offline_election", "unclean": False},
        {"ts": T0 + 70_500, **a, "event": "broker_up", "broker": 3, "broker_epoch": 9},
        {"ts": T0 + 96_000, "controller": CONTROLLER_B, "epoch": 2,
         "event": "controller_elected"},
    ]  # fmt: skip
    return brokers, controllers


def write_failure_story(root: Path, topic: str = "orders") -> None:
    """`failure_story` as the events files a cluster directory holds."""
    brokers, controllers = failure_story(topic)
    for broker in (1, 2, 3):
        _write_lines(
            log_dir_of(root, broker) / "events.jsonl", [r for r in brokers if r["broker"] == broker]
        )
    for controller in (CONTROLLER_A, CONTROLLER_B):
        _write_lines(
            root / f"controller-{controller}" / "data" / "controller-events.jsonl",
            [r for r in controllers if r["controller"] == controller],
        )


OFFSETS = TopicPartition("__consumer_offsets", 0)


def offset_commit_batches(
    commits: Iterable[tuple[int, str, TopicPartition, int | None]],
) -> list[bytes]:
    """`__consumer_offsets` batches as a group coordinator writes them: one per
    (commit time, group, partition, committed offset; None: a tombstone), with the
    broker's own encoders, plus one group-metadata record (not a commit)."""
    from broker.core.group.offsets_topic import (
        GroupValue,
        OffsetValue,
        encode_group,
        encode_offset,
        group_key,
        offset_key,
    )

    batches = []
    for ts, group, tp, offset in commits:
        value = None if offset is None else encode_offset(OffsetValue(offset, 0, "", ts))
        key = offset_key(group, tp.topic, tp.partition)
        batches.append(build_batch([Record(key, value, ts)]))
    first = min(ts for ts, *_ in commits)
    metadata = encode_group(GroupValue("consumer", 1, "range", None, first))
    batches.append(build_batch([Record(group_key("billing"), metadata, first)]))
    return batches
