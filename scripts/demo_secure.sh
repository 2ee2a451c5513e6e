#!/usr/bin/env bash
# `make run-secure`: `make run`'s demo on a cluster whose every listener is SASL_SSL.
#
#   1. `tributary cluster up --secure`: ZooKeeper, 2 controllers and 3 brokers under
#      ./.tributary-secure (or $TRIBUTARY_CLUSTER_DIR): every listener SASL_SSL with the
#      cluster's own CA, the authorizer on; the CLI is the super user `admin`
#      (<dir>/admin.properties) unless given another --command-config.
#   2. admin creates the topic `demo` (as `make run` does) and `payroll`.
#   3. admin creates the user alice (`configs alter --entity-type users --add-config
#      SCRAM-SHA-512=[password=...]`, a random password kept in <dir>/alice.properties,
#      0600: SASL_SSL, SCRAM-SHA-512, the CA) and gives her Write and Read on `demo`
#      and Read on the group `demo-group` (`acls --add`).
#   4. alice produces 8 keyed records and consumes them back (`make run`'s check) with
#      `--command-config <dir>/alice.properties`.
#   5. alice's produce to `payroll` (no ACL for her) is refused with
#      TOPIC_AUTHORIZATION_FAILED: shown; the demo fails only if it is NOT refused.
#
# Idempotent like `make run`: the cluster, topics, user and ACLs are reused. The steps
# shared with `make run` are scripts/demo_lib.sh's.
set -euo pipefail
DEMO_NAME="make run-secure"
# shellcheck source=scripts/demo_lib.sh
. "$(dirname "$0")/demo_lib.sh"
demo_init
export TRIBUTARY_CLUSTER_DIR=${TRIBUTARY_CLUSTER_DIR:-.tributary-secure}
CLUSTER_DIR=$TRIBUTARY_CLUSTER_DIR
USER_NAME=alice
GROUP=demo-group
FORBIDDEN=payroll
SCRAM_JAAS="org.apache.kafka.common.security.scram.ScramLoginModule required"

# 1. The cluster.
step "secure local cluster in $CLUSTER_DIR: every listener SASL_SSL, the authorizer on"
demo_cluster --secure
ABS_DIR=$(cd "$CLUSTER_DIR" && pwd)
ALICE="$ABS_DIR/$USER_NAME.properties"

# 2. The topics, created by admin (a super user).
demo_topic
run "creating topic $FORBIDDEN" tributary topics create "$FORBIDDEN" --if-not-exists \
  --partitions 1 --replication-factor 3 >/dev/null

# 3. The user alice: her SCRAM-SHA-512 credential, her client properties, her ACLs.
step "user $USER_NAME (SCRAM-SHA-512), her client properties in $CLUSTER_DIR/$USER_NAME.properties"
PASSWORD=$(sed -n 's/.* password="\([^"]*\)".*/\1/p' "$ALICE" 2>/dev/null | head -n 1 || true)
run "describing user $USER_NAME" tributary configs describe --entity-type users \
  --entity-name "$USER_NAME" >"$WORK/user"
if [ -n "$PASSWORD" ] && grep -q "SCRAM-SHA-512" "$WORK/user"; then
  echo "user $USER_NAME exists: reusing her"
else
  PASSWORD=${PASSWORD:-$(python -c 'import secrets; print(secrets.token_urlsafe(18))')}
  (
    umask 077
    cat >"$ALICE" <<PROPERTIES
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=$SCRAM_JAAS username="$USER_NAME" password="$PASSWORD";
ssl.truststore.location=$ABS_DIR/ca.pem
ssl.truststore.type=PEM
PROPERTIES
  )
  run "creating user $USER_NAME" tributary configs alter --entity-type users \
    --entity-name "$USER_NAME" --add-config "SCRAM-SHA-512=[password=$PASSWORD]"
fi
sed 's/password="[^"]*"/password="..."/' "$ALICE" | sed 's/^/  /'

step "ACLs: $USER_NAME may Write and Read $TOPIC, Read the group $GROUP"
run "adding $USER_NAME's ACLs on $TOPIC" tributary acls --add \
  --allow-principal "User:$USER_NAME" --operation Write --operation Read --topic "$TOPIC"
run "adding $USER_NAME's ACL on group $GROUP" tributary acls --add \
  --allow-principal "User:$USER_NAME" --operation Read --group "$GROUP"

# Every broker learns a new user's credential within about a second: wait (bounded)
# until alice can log in on each one before producing.
run "reading the cluster's status" tributary cluster status --json >"$WORK/status"
BOOTSTRAP=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["bootstrap_servers"])' \
  "$WORK/status")
for server in ${BOOTSTRAP//,/ }; do
  deadline=$((SECONDS + 30))
  until tributary --bootstrap-server "$server" --command-config "$ALICE" \
    topics describe "$TOPIC" >/dev/null 2>"$WORK/err"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "$USER_NAME logging in on $server failed: $(tail -n 1 "$WORK/err")"
    fi
    sleep 0.5
  done
done

# 4. alice's round trip, with her own properties.
DEMO_AS="as $USER_NAME (--command-config $CLUSTER_DIR/$USER_NAME.properties)"
DEMO_GROUP=$GROUP
demo_round_trip --command-config "$ALICE"

# 5. What alice may not do.
step "$USER_NAME produces to $FORBIDDEN, a topic she has no ACL for"
echo payday >"$WORK/forbidden"
rc=0
tributary --command-config "$ALICE" produce "$FORBIDDEN" <"$WORK/forbidden" \
  >"$WORK/out" 2>"$WORK/err" || rc=$?
if [ "$rc" -ne 0 ] && grep -q TOPIC_AUTHORIZATION_FAILED "$WORK/out" "$WORK/err"; then
  echo "refused, as it should be: $(grep -h TOPIC_AUTHORIZATION_FAILED "$WORK/out" "$WORK/err" | head -n 1)"
else
  fail "$USER_NAME's produce to $FORBIDDEN was not refused with TOPIC_AUTHORIZATION_FAILED" \
    "(exit code $rc: $(cat "$WORK/out" "$WORK/err" | tail -n 1))"
fi

demo_describe

step "what to try next (first: . .venv/bin/activate; export TRIBUTARY_CLUSTER_DIR=$CLUSTER_DIR)"
try "tributary acls --list --topic $TOPIC" "the ACLs (the CLI is admin: $CLUSTER_DIR/admin.properties)"
try "tributary configs describe --entity-type users" "the users with SCRAM credentials"
try "tributary --command-config $CLUSTER_DIR/$USER_NAME.properties consume $TOPIC --from-beginning" ""
try "" "read as $USER_NAME (Ctrl-C to stop)"
try "tributary cluster status --json" "client_properties and ca_file, for Kafka clients"
try "tributary cluster kill $LEADER" "crash broker $LEADER, leader of $TOPIC-0 (start it with cluster start)"
try "tributary cluster down" "stop everything (--delete-data also removes $CLUSTER_DIR)"
