"""The transactional workload: real confluent-kafka clients on the Kafka listener whose
every transaction, and every record read, becomes the `History` the transactional
checker (txn_checker.py) judges.

How it works, each client in a thread of the test process (one clock for all times):
- `Writer`: a transactional producer (`transactional.id` of its own) that writes unique
  values to the input partitions it owns, 1-4 per transaction, flushes them, keeps the
  transaction open a moment (up to `HOLD_S`) and commits or aborts it at random
  (seeded). A partition has one writer: Kafka isolates no writes, so two
  transactions writing one partition at once interleave there, which Elle counts as a
  write cycle; with one writer per partition a G0 cycle can only be a write landing
  outside its transaction. Errors: a commit or abort that timed out is called again
  (as librdkafka asks), an abortable error is answered by aborting (the outcome is
  ABORTED once the abort succeeded), and anything else makes the outcome UNKNOWN and
  the writer starts a new producer with the same id (init_transactions fences the old
  one and ends its transaction).
- `Copier`: consume-transform-produce, a read_committed consumer in one group and a
  transactional producer: each batch it reads is copied to the same partition of the
  output topic (value `<input>><copier>.<n>`, unique), its offsets sent with
  `send_offsets_to_transaction`, and committed. A failed transaction is aborted and the
  copier starts again from the group's committed offsets (new consumer and producer).
- `Observer`: a read_committed consumer of every partition of both topics during the
  run, each record kept with the time it was read (a read past the LSO shows as a read
  earlier than its transaction's commit request).
- `read_all`: after healing, every partition of the topics read from the beginning with
  read_committed (and read_uncommitted), until the ends are reached or nothing new
  comes for a while.
`Workload` starts and stops them all and builds the `History`.

The transactional producers close idle connections after `IDLE_CLOSE_MS`: the
workaround for librdkafka's send_offsets_to_transaction hanging for good after the group
coordinator's broker is killed (librdkafka issues #5511 and #5456; see `IDLE_CLOSE_MS`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.txn_checker import ABORTED, COMMITTED, UNKNOWN, History, Read, Txn

OP_TIMEOUT_S = 15.0  # one transactional call (init, commit, abort, send offsets)
CALL_ATTEMPTS = 3  # a commit or abort that times out is called again
HOLD_S = 0.2  # a writer's transaction stays open up to this long after its records landed


def _ck() -> Any:
    import confluent_kafka  # imported late: the unit tests import this module without it

    return confluent_kafka


# librdkafka (2.10 on) drops the handle of a broker a Metadata answer leaves out (a
# killed one), but its cache of group coordinators may keep pointing at it: a
# send_offsets_to_transaction then waits, whatever its timeout, for that handle to come
# up, and only looks the coordinator up again when another of the client's connections
# changes state (librdkafka issues #5511 and #5456, both open). Closing idle connections
# after a few seconds makes such a change happen, so the wait ends within seconds
# instead of when something else happens to reconnect (minutes, or never).
IDLE_CLOSE_MS = 5_000


def producer_config(bootstrap: str, transactional_id: str) -> dict:
    return {
        "connections.max.idle.ms": IDLE_CLOSE_MS,
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "transaction.timeout.ms": 15_000,
        "message.timeout.ms": 12_000,
        "socket.timeout.ms": 5_000,
        "retry.backoff.ms": 100,
    }


@dataclass
class Recorder:
    """Everything the clients did, shared by their threads."""

    txns: list[Txn] = field(default_factory=list)
    observed: list[Read] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # client errors, for the report
    lock: threading.Lock = field(default_factory=threading.Lock)

    def txn(self, txn: Txn) -> None:
        with self.lock:
            self.txns.append(txn)

    def error(self, who: str, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(f"{who}: {type(exc).__name__}: {exc}")


def read_of(message: Any, at: float) -> Read:
    return Read(message.topic(), message.partition(), message.offset(), _text(message), at)


def _text(message: Any) -> str:
    value = message.value()
    return value.decode() if value is not None else ""


class TransactionalClient:
    """A transactional producer that is replaced (same id) when it is left unusable."""

    def __init__(self, bootstrap: str, transactional_id: str, recorder: Recorder):
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.recorder = recorder
        self.producer: Any = None

    def ready(self) -> Any:
        if self.producer is None:
            producer = _ck().Producer(producer_config(self.bootstrap, self.transactional_id))
            producer.init_transactions(OP_TIMEOUT_S)
            self.producer = producer
        return self.producer

    def discard(self) -> None:
        if self.producer is not None:
            try:
                self.producer.flush(0)
            except Exception:  # noqa: BLE001 - it is being replaced anyway
                pass
        self.producer = None

    def finish(self, commit: bool) -> tuple[str, float | None]:
        """Commit or abort the open transaction; the outcome and when the commit was
        asked for."""
        asked: float | None = None
        try:
            if not commit:
                self.retried(self.producer.abort_transaction)
                return ABORTED, None
            asked = time.time()
            self.retried(self.producer.commit_transaction)
            return COMMITTED, asked
        except _ck().KafkaException as exc:
            return self.failed(exc), asked

    def retried(self, call: Callable[[float], Any]) -> None:
        """`call(timeout)`, called again on a retriable error (librdkafka: a timed-out
        commit or abort is resumed by calling it again)."""
        for attempt in range(CALL_ATTEMPTS):
            try:
                call(OP_TIMEOUT_S)
                return
            except _ck().KafkaException as exc:
                if not exc.args[0].retriable() or attempt + 1 == CALL_ATTEMPTS:
                    raise
                self.recorder.error(self.transactional_id, exc)

    def failed(self, exc: Any) -> str:
        """After an error in a transaction: abort it if the client allows, else start
        over with a new producer. ABORTED only when the abort itself succeeded."""
        self.recorder.error(self.transactional_id, exc)
        error = exc.args[0] if exc.args else None
        if error is not None and error.txn_requires_abort():
            try:
                self.retried(self.producer.abort_transaction)
                return ABORTED
            except Exception as again:  # noqa: BLE001 - the outcome is then unknown
                self.recorder.error(self.transactional_id, again)
        self.discard()
        return UNKNOWN


class Writer(TransactionalClient):
    def __init__(
        self,
        bootstrap: str,
        name: str,
        topic: str,
        partitions: list[int],
        recorder: Recorder,
        rng: random.Random,
        abort_ratio: float,
    ):
        super().__init__(bootstrap, f"txn-{name}", recorder)
        self.name, self.topic, self.partitions = name, topic, partitions
        self.rng, self.abort_ratio = rng, abort_ratio
        self.count = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                producer = self.ready()
            except Exception as exc:  # noqa: BLE001 - the cluster is down: try again
                self.recorder.error(self.name, exc)
                self.discard()
                time.sleep(0.5)
                continue
            self.one(producer)

    def one(self, producer: Any) -> None:
        self.count += 1
        tid = f"{self.name}.{self.count}"
        writes: list[tuple[str, int, str]] = []
        commit = self.rng.random() >= self.abort_ratio
        asked: float | None = None
        try:
            producer.begin_transaction()
            for k in range(self.rng.randint(1, 4)):
                partition = self.rng.choice(self.partitions)
                writes.append((self.topic, partition, f"{tid}.{k}"))
                producer.produce(self.topic, value=writes[-1][2].encode(), partition=partition)
            producer.flush(OP_TIMEOUT_S)  # in the log, and held open a while:
            time.sleep(self.rng.uniform(0, HOLD_S))  # the LSO has something to hold back
            outcome, asked = self.finish(commit)
        except _ck().KafkaException as exc:  # a failed begin or produce: abort
            outcome = self.failed(exc)
        except BufferError as exc:  # the producer's queue is full: start over
            self.recorder.error(self.name, exc)
            self.discard()
            outcome = UNKNOWN
        self.recorder.txn(Txn(tid, self.name, tuple(writes), outcome, (), asked))


class Copier(TransactionalClient):
    def __init__(
        self,
        bootstrap: str,
        name: str,
        source: str,
        target: str,
        group: str,
        recorder: Recorder,
        batch: int = 20,
    ):
        super().__init__(bootstrap, f"txn-{name}", recorder)
        self.name, self.source, self.target, self.group = name, source, target, group
        self.batch = batch  # records read, and copied, per transaction (at most)
        self.consumer: Any = None
        self.count = 0

    def _consumer(self) -> Any:
        if self.consumer is None:
            self.consumer = _ck().Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": self.group,
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "session.timeout.ms": 6_000,
                    "heartbeat.interval.ms": 500,
                }
            )
            self.consumer.subscribe([self.source])
        return self.consumer

    def restart(self) -> None:
        """Start again from the group's committed offsets."""
        self.discard()
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:  # noqa: BLE001 - being replaced
                pass
        self.consumer = None

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    consumer, producer = self._consumer(), self.ready()
                    messages = consumer.consume(num_messages=self.batch, timeout=0.5)
                except Exception as exc:  # noqa: BLE001 - the cluster is down: try again
                    self.recorder.error(self.name, exc)
                    self.restart()
                    time.sleep(0.5)
                    continue
                now = time.time()
                reads = [read_of(msg, now) for msg in messages if msg.error() is None]
                if reads:
                    self.one(consumer, producer, reads)
        finally:
            self.restart()

    def one(self, consumer: Any, producer: Any, reads: list[Read]) -> None:
        self.count += 1
        tid = f"{self.name}.{self.count}"
        writes = tuple((self.target, r.partition, f"{r.value}>{tid}") for r in reads)
        asked: float | None = None
        try:
            producer.begin_transaction()
            for topic, partition, value in writes:
                producer.produce(topic, value=value.encode(), partition=partition)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), OP_TIMEOUT_S
            )
            outcome, asked = self.finish(True)
        except _ck().KafkaException as exc:
            outcome = self.failed(exc)
        except BufferError as exc:  # the producer's queue is full: start over
            self.recorder.error(self.name, exc)
            outcome = UNKNOWN
        if outcome != COMMITTED:
            self.restart()  # read again from the committed offsets
        self.recorder.txn(Txn(tid, self.name, writes, outcome, tuple(reads), asked))


class Observer:
    """read_committed reads of every partition during the run, with their times."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, recorder: Recorder):
        self.bootstrap, self.topics, self.partitions = bootstrap, topics, partitions
        self.recorder = recorder

    def run(self, stop: threading.Event) -> None:
        ck = _ck()
        consumer = _reader(ck, self.bootstrap, "read_committed", self.topics, self.partitions)
        try:
            while not stop.is_set():
                try:
                    messages = consumer.consume(num_messages=500, timeout=0.5)
                except Exception as exc:  # noqa: BLE001 - keep observing
                    self.recorder.error("observer", exc)
                    continue
                now = time.time()
                reads = [read_of(msg, now) for msg in messages if msg.error() is None]
                with self.recorder.lock:
                    self.recorder.observed += reads
        finally:
            consumer.close()


def _reader(ck: Any, bootstrap: str, isolation: str, topics: list[str], partitions: int) -> Any:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-reader-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign(
        [ck.TopicPartition(t, p, ck.OFFSET_BEGINNING) for t in topics for p in range(partitions)]
    )
    return consumer


def read_all(
    bootstrap: str,
    topics: list[str],
    partitions: int,
    isolation: str,
    *,
    idle_s: float = 5.0,
    timeout_s: float = 60.0,
) -> list[Read]:
    """Every record of the topics, read from the beginning with `isolation`, until each
    partition's position reaches its high watermark or nothing new comes for `idle_s`
    (a hanging transaction holds a read_committed reader below it for ever)."""
    ck = _ck()
    consumer = _reader(ck, bootstrap, isolation, topics, partitions)
    out: list[Read] = []
    tps = [ck.TopicPartition(t, p) for t in topics for p in range(partitions)]
    try:
        ends = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, 10)[1] for tp in tps}
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last_new < idle_s:
            messages = consumer.consume(num_messages=1_000, timeout=0.5)
            now = time.time()
            fresh = [read_of(m, now) for m in messages if m.error() is None]
            if fresh:
                out += fresh
                last_new = time.monotonic()
            positions = consumer.position(tps)
            if all(
                tp.offset >= ends[(tp.topic, tp.partition)] or ends[(tp.topic, tp.partition)] == 0
                for tp in positions
            ):
                break
    finally:
        consumer.close()
    return out


@dataclass
class Workload:
    """Writers owning disjoint input partitions, copiers into the output topic and an
    observer, started together; `stop()` ends them and `history()` reads everything."""

    bootstrap: str
    source: str
    target: str
    partitions: int
    seed: int
    writers: int = 2
    copiers: int = 2
    abort_ratio: float = 0.3
    recorder: Recorder = field(default_factory=Recorder)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _clients: list[Any] = field(default_factory=list)

    def start(self) -> Workload:
        rng = random.Random(self.seed)
        owned: list[list[int]] = [[] for _ in range(self.writers)]
        for partition in range(self.partitions):
            owned[partition % self.writers].append(partition)
        for i in range(self.writers):
            self._clients.append(
                Writer(
                    self.bootstrap,
                    f"w{i}",
                    self.source,
                    owned[i],
                    self.recorder,
                    random.Random(rng.random()),
                    self.abort_ratio,
                )
            )
        for i in range(self.copiers):
            self._clients.append(
                Copier(
                    self.bootstrap, f"c{i}", self.source, self.target, "txn-copiers", self.recorder
                )
            )
        topics = [self.source, self.target]
        self._clients.append(Observer(self.bootstrap, topics, self.partitions, self.recorder))
        for client in self._clients:
            self._spawn(client.run)
        return self

    def _spawn(self, run: Callable[[threading.Event], None]) -> None:
        thread = threading.Thread(target=run, args=(self._stop,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, timeout_s: float = 90.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        alive = [t for t in self._threads if t.is_alive()]
        if alive:
            raise AssertionError(f"{len(alive)} workload clients did not stop in {timeout_s}s")

    def history(self) -> History:
        topics = [self.source, self.target]
        committed = read_all(self.bootstrap, topics, self.partitions, "read_committed")
        uncommitted = read_all(self.bootstrap, topics, self.partitions, "read_uncommitted")
        with self.recorder.lock:
            return History(
                list(self.recorder.txns),
                committed,
                uncommitted_reads=uncommitted,
                observed_reads=list(self.recorder.observed),
            )
