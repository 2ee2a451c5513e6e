#!/usr/bin/env bash
# Idempotent setup: a .venv with the project and its test dependencies, ZooKeeper from
# Debian's package when no ZooKeeper jar is present, and docker-compose (v1, Debian's
# package) to validate docker-compose.yml offline, kcat (a Kafka client) and the Node.js
# Kafka clients (tests/node) for the Kafka-protocol tests. Safe to run again: it only
# does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
STAMP=$VENV/.setup-stamp
ZK_JAR=${TRIBUTARY_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}

say() { printf 'setup: %s\n' "$*"; }

pick_python() {
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

apt_install() {
  # apt_install PKG...: install Debian packages when we are root; otherwise say how.
  if [ "$(id -u)" -ne 0 ]; then
    say "missing: $*. Run: sudo apt-get install -y --no-install-recommends $*"
    return 1
  fi
  if [ -z "${APT_UPDATED:-}" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  say "installing Debian packages: $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# 1. Python virtual environment with the project (editable) and test dependencies.
if [ ! -x "$VENV/bin/python" ]; then
  PY=$(pick_python) || { say "need Python >= 3.11 on PATH"; exit 1; }
  say "creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
  say "installing the project and its test dependencies into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  if ! "$VENV/bin/python" -m pip install -q -e '.[test]' >"$VENV/pip-install.log" 2>&1 ||
     ! "$VENV/bin/python" -c 'import trio, msgpack, kazoo, pyspark, pytest_trio, hypothesis'
  then
    grep -v '^WARNING: Location' "$VENV/pip-install.log" | tail -n 30
    say "installing into $VENV failed (full output: $VENV/pip-install.log)"
    exit 1
  fi
  touch "$STAMP"
fi

# 1b. Bytecode for the project's own modules, brought up to date each time (~0.5 s). Where
#     PYTHONDONTWRITEBYTECODE is set (as on these machines) imports never write it, and
#     every broker, controller and CLI process would compile the ~300 modules it imports
#     again: ~0.3 s of CPU per process start, minutes over the test suite.
"$VENV/bin/python" -m compileall -q -j 0 broker client controller server_common tools spark \
  tests >/dev/null || say "byte-compiling the project failed: it runs, only slower to start"

# 2. ZooKeeper (the jar and its Class-Path dependencies) and a Java runtime.
if [ ! -f "$ZK_JAR" ]; then
  if [ -n "${TRIBUTARY_ZOOKEEPER_JAR:-}" ]; then
    say "TRIBUTARY_ZOOKEEPER_JAR=$ZK_JAR does not exist"; exit 1
  fi
  apt_install zookeeper || {
    say "or set TRIBUTARY_ZOOKEEPER_JAR to the zookeeper jar of an existing install"; exit 1; }
fi
if ! command -v java >/dev/null 2>&1; then
  apt_install default-jre-headless || exit 1
fi

# 3. docker-compose v1, only to validate docker-compose.yml (no engine is needed for that).
if ! command -v docker-compose >/dev/null 2>&1; then
  apt_install docker-compose || say "docker-compose is absent: the compose file test will be skipped"
fi

# 4. kcat, a real Kafka client on the command line, for the Kafka-protocol listener's tests.
if ! command -v kcat >/dev/null 2>&1; then
  apt_install kcat || say "kcat is absent: the kcat tests will be skipped"
fi

# 5. Node.js Kafka clients (kafkajs, @platformatic/kafka; versions pinned in
#    tests/node/package-lock.json) for the Kafka-listener tests, when node and npm exist.
NODE_DIR=tests/node
if command -v npm >/dev/null 2>&1; then
  if [ ! -f "$NODE_DIR/node_modules/.package-lock.json" ] ||
     [ "$NODE_DIR/package-lock.json" -nt "$NODE_DIR/node_modules/.package-lock.json" ]; then
    say "installing the Node.js Kafka clients into $NODE_DIR/node_modules"
    if ! npm ci --prefix "$NODE_DIR" --no-audit --no-fund --loglevel=error >/dev/null; then
      say "npm ci failed: the Node.js client tests will be skipped"
    fi
  fi
else
  say "npm is absent: the Node.js client tests will be skipped"
fi

exit 0
