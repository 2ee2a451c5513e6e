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
# The steps are scripts/demo_lib.sh's, shared with `make run-secure` (demo_secure.sh).
set -euo pipefail
DEMO_NAME="make run"
# shellcheck source=scripts/demo_lib.sh
. "$(dirname "$0")/demo_lib.sh"
demo_init
CLUSTER_DIR=${TRIBUTARY_CLUSTER_DIR:-.tributary}

# 1. The cluster.
step "local cluster in $CLUSTER_DIR: ZooKeeper, 2 controllers, 3 brokers"
demo_cluster

# 2. The topic.
demo_topic

# 3. Produce keyed records with acks=all, consume them back.
demo_round_trip

# 4. Where everything is, and a broker to kill: the leader of partition 0.
demo_describe

step "what to try next (first: . .venv/bin/activate)"
try "tributary cluster status" "processes, the active controller, partition health"
try "tributary cluster watch" "live leaders, ISR, HW/LEO per replica (another terminal)"
try "tributary cluster kill $LEADER" "crash broker $LEADER, leader of $TOPIC-0: a new leader is elected,"
try "" "the ISR shrinks; --acks all still works (ISR 2 >= min 2)"
try "tributary cluster start $LEADER" "start it again: it catches up and rejoins the ISR"
try "tributary consume $TOPIC --from-beginning" "read everything again (Ctrl-C to stop)"
try "tributary analytics --data $CLUSTER_DIR --out analytics-out" ""
try "" "Spark reports over the brokers' logs and metrics"
try "tributary cluster down" "stop everything (--delete-data also removes $CLUSTER_DIR)"
