"""The transactional planted bugs (tests/chaos/planted_bugs/read_past_lso and
skip_kip890) take effect once the code they target exists: a Python process started
with a bug's directory first on its PYTHONPATH, importing stand-in `broker` modules
shaped as the transaction contract says (a partition's `last_stable_offset` property,
a log's `last_stable_offset(high_watermark)`, a verifier's async `verify`), gets them
patched — and code of any other shape is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PLANTED_BUGS = Path(__file__).resolve().parents[1] / "chaos" / "planted_bugs"

STAND_INS = {
    "broker/__init__.py": "",
    "broker/core/__init__.py": "",
    "broker/core/partition.py": """
        class Partition:
            high_watermark = 10

            @property
            def last_stable_offset(self):
                return 4

        class Log:
            def last_stable_offset(self, high_watermark):
                return min(4, high_watermark)

        class Other:
            def last_stable_offset(self):  # no HW to answer: left alone
                return 4
    """,
    "broker/tasks/__init__.py": "",
    "broker/tasks/verifier.py": """
        class CoordinatorVerifier:
            async def verify(self, transactional_id, producer_id, producer_epoch, partitions):
                return {tp: 48 for tp in partitions}  # INVALID_TXN_STATE

        class Unrelated:
            async def verify(self, token):
                return "checked"
    """,
}

PROBE = """
import logging, trio
logging.basicConfig(level=logging.WARNING)
from broker.core.partition import Log, Other, Partition
from broker.tasks.verifier import CoordinatorVerifier, Unrelated
lsos = Partition().last_stable_offset, Log().last_stable_offset(10), Other().last_stable_offset()
print("lso", *lsos)
answers = trio.run(CoordinatorVerifier().verify, "tx", 1, 0, ["t-0", "t-1"])
codes = sorted((tp, int(code)) for tp, code in answers.items())
print("verify", codes, trio.run(Unrelated().verify, "x"))
"""


def run_with(bug: str | None, tmp_path: Path) -> str:
    for name, text in STAND_INS.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    path = ([str(PLANTED_BUGS / bug)] if bug else []) + [str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        cwd=tmp_path,  # not the repository: its broker/ would come first
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_without_a_bug_the_stand_ins_answer_as_written(tmp_path):
    out = run_with(None, tmp_path)
    assert "lso 4 4 4" in out
    assert "verify [('t-0', 48), ('t-1', 48)] checked" in out
    assert "PLANTED BUG" not in out


def test_read_past_lso_makes_the_lso_the_high_watermark(tmp_path):
    out = run_with("read_past_lso", tmp_path)
    assert "lso 10 10 4" in out
    assert "verify [('t-0', 48), ('t-1', 48)] checked" in out
    assert "PLANTED BUG read_past_lso" in out


def test_skip_kip890_verifies_every_partition(tmp_path):
    out = run_with("skip_kip890", tmp_path)
    assert "lso 4 4 4" in out
    assert "verify [('t-0', 0), ('t-1', 0)] checked" in out
    assert "PLANTED BUG skip_kip890" in out
