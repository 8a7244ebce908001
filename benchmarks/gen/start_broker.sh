#!/usr/bin/env bash
# Start pulsar-lite 0.2.0 (pip install pulsar-lite==0.2.0) on 127.0.0.1:6650 with a fresh db.
# Adapted from the corpus generator (../shared/corpus/gen/start_broker.sh).
# usage: start_broker.sh DATADIR [CONFIG]   -> prints broker PID; log in DATADIR/broker.log
# PYTHON (env) selects the interpreter that has pulsar_lite installed (default: python3).
set -euo pipefail
DATADIR=${1:?datadir}
CONF=${2:-$(cd "$(dirname "$0")" && pwd)/broker.toml}
PY=${PYTHON:-python3}
BIN=$("$PY" -c 'import pulsar_lite,os;print(os.path.join(os.path.dirname(pulsar_lite.__file__),"bin","pulsar-lite"))')
if "$PY" -c 'import socket;socket.create_connection(("127.0.0.1",6650),0.2).close()' 2>/dev/null; then
  echo "something already listens on 127.0.0.1:6650; refusing to start" >&2; exit 1
fi
rm -rf "$DATADIR"; mkdir -p "$DATADIR"
cd "$DATADIR"
nohup "$BIN" --config "$CONF" --addr 127.0.0.1:6650 --db-path "$DATADIR/data.db" --log-level info > "$DATADIR/broker.log" 2>&1 &
PID=$!
echo $PID > "$DATADIR/broker.pid"
for i in $(seq 1 100); do
  if "$PY" -c 'import socket;socket.create_connection(("127.0.0.1",6650),0.2).close()' 2>/dev/null; then echo $PID; exit 0; fi
  sleep 0.1
done
echo "broker did not start" >&2; cat "$DATADIR/broker.log" >&2; kill "$PID" 2>/dev/null || true; exit 1
