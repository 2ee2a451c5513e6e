#!/usr/bin/env bash
# `make run`: start a local cluster and show produce/consume (filled in by the cluster issue).
set -euo pipefail
echo "make run will: start ZooKeeper, 2 controllers and 3 brokers (tributary cluster up),"
echo "create a demo topic with RF 3, produce and consume a few records, and print what to try next."
echo "The local cluster is not built yet." >&2
exit 1
