"""Consumer groups through the CLI on a real cluster (ZooKeeper, 3 broker processes, a
controller), as a user types it: produce 100 records to a 3-partition topic, consume 30
with `--group`, then 30 more in a second run (no overlap, no gap), `groups describe`
prints lag that matches produced minus consumed (and so does `cluster watch --once`),
`reset-offsets` is a dry run until `--execute`, and `groups delete` removes the group
once it is empty. Each CLI call is the real entry point in a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

GROUP_OVERRIDES = {
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 500,
}


def rows(out: str) -> dict[tuple[str, int], list[str]]:
    """(topic, partition) -> cells of a `groups describe` / `reset-offsets` table."""
    found = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) >= 4 and cells[0] != "GROUP" and cells[2].isdigit():
            found[(cells[1], int(cells[2]))] = cells
    return found


def test_group_consume_describe_reset_delete(start_cluster):
    cluster = start_cluster(brokers=3, controllers=1, **GROUP_OVERRIDES)
    bootstrap = cluster.state.bootstrap_servers

    def cli(*args: str, stdin: str | None = None, ok: bool = True):
        result = subprocess.run(
            [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())",
             *args, "--bootstrap-server", bootstrap],
            input=stdin, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if ok:
            assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    cli("topics", "create", "orders", "--partitions", "3", "--replication-factor", "3")
    produced = [f"order-{i:03d}" for i in range(100)]
    cli("produce", "orders", "--acks", "all", stdin="".join(f"{v}\n" for v in produced))

    first = cli("consume", "orders", "--group", "billing", "--from-beginning",
                "--max-messages", "30", "--timeout-ms", "20000")  # fmt: skip
    second = cli("consume", "orders", "--group", "billing", "--max-messages", "30",
                 "--timeout-ms", "20000")  # fmt: skip
    printed = first.stdout.split() + second.stdout.split()
    assert len(printed) == 60 and len(set(printed)) == 60, (first.stdout, second.stdout)
    assert set(printed) <= set(produced)

    described = cli("groups", "describe", "billing").stdout
    assert described.splitlines()[0] == "Consumer group 'billing' has no active members."
    table = rows(described)
    assert sorted(table) == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert sum(int(c[3]) for c in table.values()) == 60  # CURRENT-OFFSET: consumed
    assert sum(int(c[4]) for c in table.values()) == 100  # LOG-END-OFFSET: produced
    assert sum(int(c[5]) for c in table.values()) == 40  # LAG: produced minus consumed

    # No gap: a third run from the committed offsets prints exactly the other 40.
    third = cli("consume", "orders", "--group", "billing", "--max-messages", "40",
                "--timeout-ms", "20000")  # fmt: skip
    assert sorted(printed + third.stdout.split()) == produced
    table = rows(cli("groups", "describe", "billing").stdout)
    assert sum(int(c[5]) for c in table.values()) == 0

    # The live view shows the group with its lag (0 now).
    watch = subprocess.run(
        [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())",
         "cluster", "--dir", str(cluster.directory), "watch", "--once", "--width", "200"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert watch.returncode == 0, watch.stderr
    line = next(row for row in watch.stdout.splitlines() if row.split()[:1] == ["billing"])
    assert line.split()[1] == "Empty" and line.split()[-1] == "0", watch.stdout

    dry = cli("groups", "reset-offsets", "billing", "--topic", "orders", "--to-earliest")
    assert "--execute option is missing" in dry.stderr
    assert {tp: c[3] for tp, c in rows(dry.stdout).items()} == {
        ("orders", p): "0" for p in range(3)
    }
    assert sum(int(c[5]) for c in rows(cli("groups", "describe", "billing").stdout).values()) == 0
    cli("groups", "reset-offsets", "billing", "--topic", "orders", "--to-earliest", "--execute")
    table = rows(cli("groups", "describe", "billing").stdout)
    assert sum(int(c[5]) for c in table.values()) == 100

    deleted = cli("groups", "delete", "billing")
    assert deleted.stdout.strip() == "Deletion of consumer group 'billing' was successful."
    gone = cli("groups", "describe", "billing", ok=False)
    assert gone.returncode == 1
    assert gone.stderr.strip() == "error: consumer group 'billing' does not exist"
