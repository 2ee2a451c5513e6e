#!/usr/bin/env bash
# `make run`: a local cluster, a replicated topic, records produced and consumed back.
#
#   1. `tributary cluster up`: ZooKeeper, 2 controllers and 3 brokers as local processes
#      under ./.tributary (or $TRIBUTARY_CLUSTER_DIR). A cluster already there is reused;
#      any of its processes that stopped are started again.
#   2. `tributary topics create demo --if-not-exists --partitions 6
#      --replication-factor 3 --config min.insync.replicas=2`.
#   3. 8 keyed records (`key:value` lines) with `tributary produce demo --acks all
#      --key-separator : --report`, then `tributary consume demo --from-beginning`: every
#      acknowledged record must come back, at the partition and offset it was acked at.
#   4. `tributary topics describe demo`, and what to try next.
#
# Idempotent and quick (a few seconds when the cluster is up). A step that fails stops
# the script with one line on stderr naming the step and the reason; exit code 1.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

TOPIC=demo
PARTITIONS=6
REPLICATION_FACTOR=3
MIN_INSYNC_REPLICAS=2
CLUSTER_DIR=${TRIBUTARY_CLUSTER_DIR:-.tributary}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if [ -t 1 ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD='' PLAIN=''; fi
step() { printf '\n%s==> %s%s\n' "$BOLD" "$*" "$PLAIN"; }

fail() {
  echo "make run: $*" >&2
  exit 1
}

# run WHAT CMD...: run CMD (stdin passed through), print its output; on failure stop
# with one line: WHAT and the last line CMD wrote to stderr.
run() {
  local what=$1 rc=0 reason
  shift
  "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  if [ "$rc" -ne 0 ]; then
    reason=$(grep -v '^[[:space:]]*$' "$WORK/err" | tail -n 1 || true)
    fail "$what failed: ${reason:-exit code $rc}"
  fi
  cat "$WORK/out"
}

command -v tributary >/dev/null 2>&1 || fail "tributary is not installed: run \`make setup\`"

# 1. The cluster.
step "local cluster in $CLUSTER_DIR: ZooKeeper, 2 controllers, 3 brokers"
run "starting the cluster (tributary cluster up)" tributary cluster up --brokers 3 --controllers 2

# 2. The topic.
step "topic $TOPIC: $PARTITIONS partitions, replication factor $REPLICATION_FACTOR, min.insync.replicas=$MIN_INSYNC_REPLICAS"
run "creating topic $TOPIC" tributary topics create "$TOPIC" --if-not-exists \
  --partitions "$PARTITIONS" --replication-factor "$REPLICATION_FACTOR" \
  --config "min.insync.replicas=$MIN_INSYNC_REPLICAS" >"$WORK/created"
if [ -s "$WORK/created" ]; then cat "$WORK/created"; else echo "topic $TOPIC exists: reusing it"; fi

# 3. Produce keyed records with acks=all, consume them back.
RUN_ID="run $(date +%H:%M:%S)"
cat >"$WORK/records" <<EOF
user-1:signed up ($RUN_ID)
user-2:signed up ($RUN_ID)
user-1:added a book to the cart ($RUN_ID)
user-3:signed up ($RUN_ID)
user-2:added a pen to the cart ($RUN_ID)
user-1:checked out ($RUN_ID)
user-3:added a mug to the cart ($RUN_ID)
user-2:checked out ($RUN_ID)
EOF
step "producing $(wc -l <"$WORK/records") keyed records with --acks all"
sed 's/^/  /' "$WORK/records"
run "producing to $TOPIC" tributary produce "$TOPIC" --acks all --key-separator : --report \
  <"$WORK/records" >"$WORK/acks"

step "consuming $TOPIC from the beginning"
run "consuming from $TOPIC" tributary consume "$TOPIC" --from-beginning --format json \
  --timeout-ms 3000 >"$WORK/consumed"
python - "$WORK/acks" "$WORK/consumed" "$RUN_ID" <<'EOF' || exit 1
"""Every acked record came back where it was acked; the same key went to one partition."""
import json
import sys

acks_path, consumed_path, run_id = sys.argv[1:]


def records(path):
    found = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    pass
    return found


acked = records(acks_path)
consumed = records(consumed_path)
if len(acked) != 8:
    sys.exit(f"make run: producing acknowledged {len(acked)} of 8 records")
seen = {(r["partition"], r["offset"]): r for r in consumed}
missing = [a for a in acked if (a["partition"], a["offset"]) not in seen]
wrong = [
    a
    for a in acked
    if (a["partition"], a["offset"]) in seen
    and seen[(a["partition"], a["offset"])]["value"] != a["value"]
]
if missing or wrong:
    sys.exit(
        f"make run: consuming returned {len(acked) - len(missing) - len(wrong)} of the "
        f"{len(acked)} records just produced ({len(missing)} missing, {len(wrong)} different)"
    )
ours = sorted(
    (r for r in consumed if run_id in str(r.get("value"))),
    key=lambda r: (r["partition"], r["offset"]),
)
print(f"read {len(consumed)} record(s) in all; this run's {len(ours)}, by partition:")
for r in ours:
    print(f"  partition {r['partition']}  offset {r['offset']:>4}  {r['key']:<7} {r['value']}")
by_key = {}
for a in acked:
    by_key.setdefault(a["key"], set()).add(a["partition"])
print(
    "same key, same partition: "
    + ", ".join(f"{k} -> {sorted(p)[0]}" for k, p in sorted(by_key.items()) if len(p) == 1)
)
EOF

# 4. Where everything is, and a broker to kill: the leader of partition 0.
step "tributary topics describe $TOPIC"
run "describing $TOPIC" tributary topics describe "$TOPIC" >"$WORK/described"
cat "$WORK/described"
LEADER=$(awk '/Partition: 0[[:space:]]/ { for (i = 1; i < NF; i++) if ($i == "Leader:") print $(i + 1) }' \
  "$WORK/described" | head -n 1)
case "$LEADER" in '' | *[!0-9]*) LEADER=2 ;; esac

step "what to try next (first: . .venv/bin/activate)"
try() { printf '  %-44s %s\n' "$1" "$2"; }
try "tributary cluster status" "processes, the active controller, partition health"
try "tributary cluster watch" "live leaders, ISR, HW/LEO per replica (another terminal)"
try "tributary cluster kill $LEADER" "crash broker $LEADER, leader of $TOPIC-0: a new leader is elected,"
try "" "the ISR shrinks; --acks all still works (ISR 2 >= min 2)"
try "tributary cluster start $LEADER" "start it again: it catches up and rejoins the ISR"
try "tributary consume $TOPIC --from-beginning" "read everything again (Ctrl-C to stop)"
try "tributary analytics --data $CLUSTER_DIR --out analytics-out" ""
try "" "Spark reports over the brokers' logs and metrics"
try "tributary cluster down" "stop everything (--delete-data also removes $CLUSTER_DIR)"
