"""This machine's physical references, measured in the same run as the benchmarks.

- `loopback_mib_s()`: raw TCP throughput between two processes over loopback: a child
  process writes 1 MiB chunks to a socket for a fixed time while this one reads them
  (what a broker's socket could move with no protocol work at all).
- `file_write_mib_s(directory)`: sequential 1 MiB writes to a new file in `directory`
  (the data directory's file system), no fsync, the way brokers write segments; the file
  is deleted afterwards.
Each is measured once per process (cached), so several benchmark rows share one figure.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import socket
import tempfile
import time

CHUNK = 1 << 20
SECONDS = 2.0
FILE_BYTES = 2 << 30  # 2 GiB: past the first burst into the page cache


def _send(port: int, seconds: float) -> None:
    data = b"\0" * CHUNK
    with socket.create_connection(("127.0.0.1", port)) as sock:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            sock.sendall(data)


@functools.cache
def loopback_mib_s(seconds: float = SECONDS) -> float:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        sender = multiprocessing.get_context("spawn").Process(target=_send, args=(port, seconds))
        sender.start()
        try:
            conn, _ = server.accept()
            with conn:
                buffer = bytearray(CHUNK)
                view = memoryview(buffer)
                received = 0
                started = time.perf_counter()
                while True:
                    n = conn.recv_into(view)
                    if not n:
                        break
                    received += n
                elapsed = time.perf_counter() - started
        finally:
            sender.join(timeout=seconds + 10)
            if sender.is_alive():
                sender.kill()
                sender.join()
    return received / elapsed / 2**20


@functools.cache
def file_write_mib_s(directory: str | None = None, total: int = FILE_BYTES) -> float:
    data = b"\1" * CHUNK
    fd, path = tempfile.mkstemp(prefix="bench-write-", dir=directory)
    try:
        started = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, data)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        os.unlink(path)
    return written / elapsed / 2**20
