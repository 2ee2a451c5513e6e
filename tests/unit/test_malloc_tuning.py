"""A server process with tuned malloc gives a burst of 1 MiB buffers back to the system.

The burst interleaves the big buffers with small long-lived objects, as a broker does
(record batches between partition state): with glibc's defaults the freed megabytes stay
in the process; after `tune_malloc()` they do not. Runs in a child process so this test
run's own allocator is left alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BURST = """
import gc, sys
from server_common.malloc_tuning import tune_malloc, release_free_memory

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

tune_malloc()
before = rss_mb()
small, big = [], []
for i in range(200):
    big.append(bytearray(1 << 20))  # a 1 MiB batch in flight (touched)
    small.append(bytes(600) + bytes([i % 256]))  # long-lived state allocated after it
    if len(big) > 8:
        big.pop(0)
big.clear()
gc.collect()
release_free_memory()
print(rss_mb() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc")
def test_a_burst_of_big_buffers_leaves_no_resident_memory_behind():
    out = subprocess.run(
        [sys.executable, "-c", BURST], cwd=ROOT, capture_output=True, text=True, check=True
    )
    retained_mb = float(out.stdout)
    assert retained_mb < 4, f"{retained_mb:.1f} MB of the burst stayed resident"
