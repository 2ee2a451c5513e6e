"""`tributary dump-log --files F[,F] [--print-data-log]`: a segment's batches and records,
as kafka-dump-log.sh prints them.

How it works: reads the files directly (no broker involved; point it at a broker's
`data/<topic>-<partition>/` files). A `.log` segment prints `Starting offset: <base>`
then one line per batch (`baseOffset: .. lastOffset: .. count: .. ... crc: .. isvalid:
..`); with `--print-data-log` (or `--deep-iteration`) each record follows as a
`| offset: ..` line, with its key and payload as text (undecodable bytes replaced) when
`--print-data-log` asks for data. A torn or corrupt tail ends the dump with a line
saying where. An `.index` prints `offset: .. position: ..` per entry, a `.timeindex`
`timestamp: .. offset: ..`, a `.txnindex` (aborted transactions) `version: ..
producerId: .. firstOffset: .. lastOffset: .. lastStableOffset: ..`. Batch lines say
`isTransactional` and `isControl`; a transaction marker's record line ends with
`endTxnMarker: COMMIT|ABORT coordinatorEpoch: ..`, as Kafka's tool prints it.
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

from client.protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    RecordError,
    decode_records,
    iter_batches,
    read_control_marker,
    validate_batch,
)
from tools.errors import CliError

_OFFSET_ENTRY = struct.Struct(">II")  # relative offset, position (broker/core/log/index.py)
_TIME_ENTRY = struct.Struct(">qI")  # timestamp, relative offset
_TXN_ENTRY = struct.Struct(">hqqqq")  # broker/core/log/txn_index.py


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "dump-log", help="print the batches and records of segment files (as kafka-dump-log)"
    )
    parser.add_argument(
        "--files", required=True, metavar="F[,F]", help=".log/.index/.timeindex/.txnindex"
    )
    parser.add_argument("--print-data-log", action="store_true", help="records with their data")
    parser.add_argument("--deep-iteration", action="store_true", help="records, without data")
    parser.set_defaults(handler=_dump_log)


def _dump_log(args: argparse.Namespace) -> int:
    out = sys.stdout
    for name in [f for f in args.files.split(",") if f.strip()]:
        path = Path(name.strip())
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
        out.write(f"Dumping {path}\n")
        base = _base_offset(path)
        if path.suffix == ".log":
            deep = args.deep_iteration or args.print_data_log
            out.writelines(dump_segment(data, base, deep=deep, data_log=args.print_data_log))
        elif path.suffix == ".index":
            for rel, position in _entries(data, _OFFSET_ENTRY):
                out.write(f"offset: {base + rel} position: {position}\n")
        elif path.suffix == ".timeindex":
            for timestamp, rel in _entries(data, _TIME_ENTRY):
                out.write(f"timestamp: {timestamp} offset: {base + rel}\n")
        elif path.suffix == ".txnindex":
            usable = len(data) - len(data) % _TXN_ENTRY.size
            for pos in range(0, usable, _TXN_ENTRY.size):
                version, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, pos)
                out.write(
                    f"version: {version} producerId: {pid} firstOffset: {first} "
                    f"lastOffset: {last} lastStableOffset: {lso}\n"
                )
        else:
            raise CliError(f"{path}: not a .log, .index, .timeindex or .txnindex file")
    return 0


def _base_offset(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError:
        raise CliError(f"{path}: segment files are named by their base offset") from None


def _entries(data: bytes, entry: struct.Struct) -> list[tuple[int, int]]:
    usable = len(data) - len(data) % entry.size
    entries = [entry.unpack_from(data, pos) for pos in range(0, usable, entry.size)]
    return [e for e in entries if any(e)]  # preallocated, unused slots are zeros


def dump_segment(data: bytes, base: int, *, deep: bool, data_log: bool = False):
    """The lines kafka-dump-log prints for a segment's bytes."""
    yield f"Starting offset: {base}\n"
    try:
        for position, header in iter_batches(data):
            try:
                validate_batch(data, position, strict=False)
                valid = "true"
            except RecordError:
                valid = "false"
            last_sequence = header.base_sequence
            if last_sequence >= 0:
                last_sequence += header.last_offset_delta
            yield (
                f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
                f"count: {header.records_count} baseSequence: {header.base_sequence} "
                f"lastSequence: {last_sequence} "
                f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
                f"partitionLeaderEpoch: {header.partition_leader_epoch} "
                f"isTransactional: {_flag(header.attributes & ATTR_TRANSACTIONAL)} "
                f"isControl: {_flag(header.attributes & ATTR_CONTROL)} "
                f"position: {position} CreateTime: {header.max_timestamp} "
                f"size: {header.size} magic: {header.magic} "
                f"compresscodec: {header.codec.name.lower()} crc: {header.crc} isvalid: {valid}\n"
            )
            if deep and valid == "true":
                batch = data[position : position + header.size]
                marker = _marker(batch) if header.attributes & ATTR_CONTROL else ""
                for record in decode_records(batch):
                    yield _record_line(record, data_log and not marker, marker)
    except RecordError as exc:
        yield f"Found a corrupt or torn tail: {exc}\n"


def _flag(bit: int) -> str:
    return "true" if bit else "false"


def _marker(batch: bytes) -> str:
    try:
        commit, coordinator_epoch = read_control_marker(batch)
    except RecordError:
        return " endTxnMarker: unknown"
    return f" endTxnMarker: {'COMMIT' if commit else 'ABORT'} coordinatorEpoch: {coordinator_epoch}"


def _record_line(record, data_log: bool, marker: str = "") -> str:
    line = (
        f"| offset: {record.offset} CreateTime: {record.timestamp} "
        f"keySize: {-1 if record.key is None else len(record.key)} "
        f"valueSize: {-1 if record.value is None else len(record.value)} sequence: -1 "
        f"headerKeys: [{','.join(name for name, _ in record.headers)}]"
    )
    if data_log:
        if record.key is not None:
            line += f" key: {record.key.decode('utf-8', errors='replace')}"
        payload = "" if record.value is None else record.value.decode("utf-8", errors="replace")
        line += f" payload: {payload}"
    return line + marker + "\n"
