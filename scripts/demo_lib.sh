# The steps `make run` (scripts/demo.sh) and `make run-secure` (scripts/demo_secure.sh)
# share, sourced by both after setting DEMO_NAME (how failures are prefixed):
#
#   demo_init              PATH, $WORK (removed at exit), step / fail / run
#   demo_cluster ARGS...   `tributary cluster up --brokers 3 --controllers 2 ARGS...`
#   demo_topic             `topics create demo --if-not-exists ...` (existing: reused)
#   demo_round_trip ARGS...  8 keyed records produced with --acks all, consumed back and
#                          checked (ARGS go to both commands, e.g. --command-config F)
#   demo_describe          `topics describe demo`; sets LEADER (of demo-0)
#   try CMD WHAT           one line of "what to try next"
#
# A step that fails stops the script with one line on stderr naming the step and the
# reason; exit code 1.

TOPIC=demo
PARTITIONS=6
REPLICATION_FACTOR=3
MIN_INSYNC_REPLICAS=2

demo_init() {
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  export PATH="$PWD/.venv/bin:$PATH"
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  if [ -t 1 ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD='' PLAIN=''; fi
  command -v tributary >/dev/null 2>&1 || fail "tributary is not installed: run \`make setup\`"
}

step() { printf '\n%s==> %s%s\n' "$BOLD" "$*" "$PLAIN"; }

fail() {
  echo "$DEMO_NAME: $*" >&2
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

try() { printf '  %-44s %s\n' "$1" "$2"; }

demo_cluster() {
  run "starting the cluster (tributary cluster up)" tributary cluster up --brokers 3 \
    --controllers 2 "$@"
}

demo_topic() {
  step "topic $TOPIC: $PARTITIONS partitions, replication factor $REPLICATION_FACTOR, min.insync.replicas=$MIN_INSYNC_REPLICAS"
  run "creating topic $TOPIC" tributary topics create "$TOPIC" --if-not-exists \
    --partitions "$PARTITIONS" --replication-factor "$REPLICATION_FACTOR" \
    --config "min.insync.replicas=$MIN_INSYNC_REPLICAS" >"$WORK/created"
  if [ -s "$WORK/created" ]; then cat "$WORK/created"; else echo "topic $TOPIC exists: reusing it"; fi
}

# demo_round_trip [ARGS...]: produce keyed records with acks=all, consume them back.
demo_round_trip() {
  local run_id
  run_id="run $(date +%H:%M:%S)"
  cat >"$WORK/records" <<EOF
user-1:signed up ($run_id)
user-2:signed up ($run_id)
user-1:added a book to the cart ($run_id)
user-3:signed up ($run_id)
user-2:added a pen to the cart ($run_id)
user-1:checked out ($run_id)
user-3:added a mug to the cart ($run_id)
user-2:checked out ($run_id)
EOF
  step "producing $(wc -l <"$WORK/records") keyed records with --acks all${DEMO_AS:+ $DEMO_AS}"
  sed 's/^/  /' "$WORK/records"
  run "producing to $TOPIC" tributary "$@" produce "$TOPIC" --acks all --key-separator : \
    --report <"$WORK/records" >"$WORK/acks"

  step "consuming $TOPIC from the beginning${DEMO_AS:+ $DEMO_AS}"
  run "consuming from $TOPIC" tributary "$@" consume "$TOPIC" --from-beginning --format json \
    --timeout-ms 3000 ${DEMO_GROUP:+--group "$DEMO_GROUP"} >"$WORK/consumed"
  python - "$WORK/acks" "$WORK/consumed" "$run_id" "$DEMO_NAME" <<'EOF' || exit 1
"""Every acked record came back where it was acked; the same key went to one partition."""
import json
import sys

acks_path, consumed_path, run_id, name = sys.argv[1:]


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
    sys.exit(f"{name}: producing acknowledged {len(acked)} of 8 records")
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
        f"{name}: consuming returned {len(acked) - len(missing) - len(wrong)} of the "
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
}

# Where everything is, and a broker to kill: LEADER, the leader of partition 0.
demo_describe() {
  step "tributary topics describe $TOPIC"
  run "describing $TOPIC" tributary topics describe "$TOPIC" >"$WORK/described"
  cat "$WORK/described"
  LEADER=$(awk '/Partition: 0[[:space:]]/ { for (i = 1; i < NF; i++) if ($i == "Leader:") print $(i + 1) }' \
    "$WORK/described" | head -n 1)
  case "$LEADER" in '' | *[!0-9]*) LEADER=2 ;; esac
}
