"""Issue 15 on the in-process cluster: lossless output formats (`consume --format raw`,
`base64`), kafka-console-consumer's `--property` layout, produce's `--separator`, and
settings that can never work refused as one line (min.insync.replicas > RF, a delivery
timeout below the request timeout)."""

from __future__ import annotations

import base64
import io
import json
import sys

import pytest

from tests.support.cluster import ClusterThread
from tools.cli import main
from tools.commands.record_format import RecordFormatter, parse_properties, unescape
from tools.errors import CliError


@pytest.fixture(scope="module")
def runner():
    runner = ClusterThread(3)
    with runner:
        yield runner


@pytest.fixture
def run(runner, capsysbinary, monkeypatch):
    """run(*argv, stdin=b"") -> (exit code, stdout bytes, stderr text)."""

    def run(*argv: str, stdin: bytes = b""):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = main([*argv, "--bootstrap-server", runner.cluster.bootstrap])
        out, err = capsysbinary.readouterr()
        return code, out, err.decode()

    return run


BINARY = [bytes(range(1, 256)), b"", b"\xff\xfe not utf-8 \x80", b"line\nbreaks\r\n"]


def test_binary_values_round_trip_through_produce_and_consume_raw(run):
    assert run("topics", "create", "bin", "--partitions", "1")[0] == 0
    stdin = b"\0".join(BINARY)
    code, _, err = run("produce", "bin", "--separator", "\\0", stdin=stdin)
    assert code == 0, err
    code, out, _ = run(
        "consume", "bin", "--from-beginning", "--format", "raw", "--separator", "\\0",
        "--max-messages", str(len(BINARY)), "--timeout-ms", "5000",
    )  # fmt: skip
    assert code == 0
    assert out == b"".join(value + b"\0" for value in BINARY)  # byte for byte

    code, out, _ = run("consume", "bin", "--from-beginning", "--format", "base64",
                       "--max-messages", str(len(BINARY)), "--timeout-ms", "5000")  # fmt: skip
    rows = [json.loads(line) for line in out.splitlines()]
    assert [base64.b64decode(r["value"]) for r in rows] == BINARY
    assert {r["encoding"] for r in rows} == {"base64"}


def test_console_consumer_properties(run):
    assert run("topics", "create", "props", "--partitions", "1")[0] == 0
    assert run("produce", "props", "--key-separator", ":", stdin=b"k1:v1\nk2:v2\n")[0] == 0
    code, out, _ = run(
        "consume", "props", "--from-beginning", "--max-messages", "2", "--timeout-ms", "5000",
        "--property", "print.key=true", "--property", "print.partition=true",
        "--property", "print.offset=true", "--property", "key.separator= | ",
    )  # fmt: skip
    assert code == 0
    assert out.decode().splitlines() == [
        "Partition:0 | Offset:0 | k1 | v1",
        "Partition:0 | Offset:1 | k2 | v2",
    ]


def test_formatter_headers_timestamps_and_nulls():
    class Record:
        topic, partition, offset, timestamp = "t", 1, 7, 1700000000000
        key, value, headers = None, b"v", (("h", b"x"), ("g", b"y"))

    props = parse_properties(
        ["print.timestamp=true", "print.headers=true", "print.key=true", "null.literal=NULL"]
    )
    assert RecordFormatter("text", props).render(Record()) == (
        b"CreateTime:1700000000000\th:x,g:y\tNULL\tv\n"
    )
    assert unescape("a\\tb\\0\\\\") == "a\tb\0\\"
    with pytest.raises(CliError, match="print.key must be true or false"):
        parse_properties(["print.key=yes"])


def test_settings_that_can_never_work_are_refused_in_one_line(run):
    code, _, err = run("topics", "create", "misr", "--replication-factor", "3",
                       "--config", "min.insync.replicas=4")  # fmt: skip
    assert code == 1
    assert err.strip() == (
        "error: INVALID_CONFIG: min.insync.replicas (4) is larger than the replication factor "
        "(3): every acks=all produce would fail with NOT_ENOUGH_REPLICAS"
    )
    assert "misr" not in run("topics", "list")[1].decode().split()

    code, _, err = run("produce", "props", "--delivery-timeout-ms", "1000")
    assert code == 2 and "--delivery-timeout-ms (1000) must be at least" in err
    code, _, err = run("consume", "props", "--property", "print.colour=true")
    assert code == 2 and err.count("\n") == 1 and "--property expects NAME=VALUE" in err
