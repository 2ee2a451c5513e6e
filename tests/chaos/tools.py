"""The verifiable tools as real processes, as Kafka's system tests run them.

How it works: `ToolProcess` starts `python -m tools <command> ...` in its own session
(stdout a pipe, stderr a file), and a reader thread parses each stdout line as one JSON
event into `events` (and `on_event`). `stop()` sends SIGTERM and waits (SIGKILL after a
bound), so every path ends with the process gone, by its pid.

`VerifiableProducer` keeps, per value, where it was acknowledged and how long it took;
`VerifiableConsumer` (always `--verbose`) keeps every record it read. The checker
(tests/chaos/checker.py) compares the two. `command_config` (a Kafka client properties
file) is passed as `--command-config`: how they log in to a secure cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class ToolProcess:
    def __init__(self, args: list[str], log_path: Path, on_event: Callable | None = None):
        self.args = args
        self.log_path = Path(log_path)
        self.events: list[dict] = []
        self.on_event = on_event
        self.lock = threading.Lock()
        # The repository alone on the path: a planted bug's directory (test_planted_bug.py)
        # is the brokers' only.
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self._stderr = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tools", *args],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            cwd=str(REPO),
            env=env,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)
                self.handle(event)
            if self.on_event is not None:
                self.on_event(event)

    def handle(self, event: dict) -> None:
        """Subclasses index the events they care about (called under `lock`)."""

    def named(self, name: str) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e.get("name") == name]

    def wait_for(self, name: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.named(name)
            if found:
                return found[0]
            if self.process.poll() is not None:
                self._reader.join(2)
                found = self.named(name)
                if found:
                    return found[0]
                raise AssertionError(
                    f"{self.args[0]} exited with {self.process.returncode} before {name}; "
                    f"see {self.log_path}: {self.stderr_tail()}"
                )
            time.sleep(0.05)
        raise AssertionError(f"{self.args[0]}: no {name} within {timeout_s}s")

    def stderr_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace").strip().splitlines()[-1]
        except (OSError, IndexError):
            return ""

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM, wait for the tool to finish (it flushes), SIGKILL if it does not."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            if self.wait(timeout_s) is None:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._reader.join(10)
        self._stderr.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self._reader.join(10)
        self._stderr.close()


class VerifiableProducer(ToolProcess):
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        log_path: Path,
        *,
        throughput: int = 200,
        max_messages: int = -1,
        idempotent: bool | None = None,
        value_prefix: int | None = None,
        request_timeout_ms: int = 10_000,
        delivery_timeout_ms: int = 60_000,
        linger_ms: int = 5,
        command_config: str | None = None,
    ):
        self.acked: dict[str, tuple[int, int]] = {}  # value -> (partition, offset)
        self.ack_times: dict[str, float] = {}  # value -> wall-clock time of its ack
        self.latencies: list[tuple[float, float]] = []  # (ack wall time s, latency ms)
        self.failed: dict[str, str] = {}
        args = [
            "verifiable-producer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--acks",
            "all",
            "--throughput",
            str(throughput),
            "--max-messages",
            str(max_messages),
            "--request-timeout-ms",
            str(request_timeout_ms),
            "--delivery-timeout-ms",
            str(delivery_timeout_ms),
            "--linger-ms",
            str(linger_ms),
            "--repeating-keys",
            "64",
        ]
        if value_prefix is not None:
            args += ["--value-prefix", str(value_prefix)]
        if idempotent is not None:
            args.append("--enable-idempotence" if idempotent else "--no-enable-idempotence")
        if command_config is not None:
            args += ["--command-config", command_config]
        super().__init__(args, log_path)

    def handle(self, event: dict) -> None:
        name = event.get("name")
        if name == "producer_send_success":
            self.acked[event["value"]] = (event["partition"], event["offset"])
            self.ack_times[event["value"]] = event["timestamp"] / 1000
            self.latencies.append((event["timestamp"] / 1000, event.get("latency_ms", 0.0)))
        elif name == "producer_send_error":
            self.failed[event["value"]] = f"{event.get('exception')}: {event.get('message')}"

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)


class VerifiableConsumer(ToolProcess):
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        log_path: Path,
        *,
        group_id: str | None = None,
        command_config: str | None = None,
    ):
        self.records: list[tuple[int, int, str]] = []  # (partition, offset, value)
        self.values: set[str] = set()
        args = ["verifiable-consumer", "--bootstrap-server", bootstrap, "--topic", topic]
        args += ["--verbose", "--session-timeout", "6000"]
        if group_id is not None:
            args += ["--group-id", group_id]
        if command_config is not None:
            args += ["--command-config", command_config]
        super().__init__(args, log_path)

    def handle(self, event: dict) -> None:
        if event.get("name") == "record_data":
            self.records.append((event["partition"], event["offset"], event["value"]))
            self.values.add(event["value"])

    def has_all(self, values) -> bool:
        with self.lock:
            return all(v in self.values for v in values)

    def wait_for_values(self, values, timeout_s: float, idle_s: float = 10.0) -> bool:
        """Until every value in `values` was read; gives up after `timeout_s`, or after
        `idle_s` without any new record."""
        deadline = time.monotonic() + timeout_s
        last_count, last_change = -1, time.monotonic()
        while time.monotonic() < deadline:
            with self.lock:
                count = len(self.records)
                if all(v in self.values for v in values):
                    return True
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            elif time.monotonic() - last_change > idle_s:
                return False
            if not self.running():
                return False
            time.sleep(0.1)
        return False
