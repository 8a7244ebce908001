#!/usr/bin/env bash
# Recreate the benchmark capture with the real broker (pulsar-lite 0.2.0) and client (pulsar-client 3.13.0).
#
# usage: benchmarks/make_big_capture.sh [full|half|quick] [extra args for gen/perf_capture.py]
#   full  (default): 200,000 non-batched + 1,000,000 batched msgs -> benchmarks/out/perf_big.pcap   (~240 MB, ~5 min)
#   half           : 100,000 + 500,000                            -> benchmarks/out/perf_half.pcap  (~120 MB)
#   quick          :  20,000 + 100,000                            -> benchmarks/out/perf_quick.pcap (~24 MB, ~30 s)
#   custom         : benchmarks/make_big_capture.sh custom --nonbatched N --batched M [--out PATH]
#
# Needs: root (tcpdump on lo), tcpdump, a free 127.0.0.1:6650, and a Python with pulsar-lite + pulsar-client
# (PYTHON env, default: the repo's .venv/bin/python if present, else python3). Traffic stays on loopback.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
OUTDIR="$HERE/out"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHON
SIZE=${1:-full}
[ $# -gt 0 ] && shift
case "$SIZE" in
  full)   ARGS=(--nonbatched 200000 --batched 1000000); OUT="$OUTDIR/perf_big.pcap" ;;
  half)   ARGS=(--nonbatched 100000 --batched 500000);  OUT="$OUTDIR/perf_half.pcap" ;;
  quick)  ARGS=(--nonbatched 20000  --batched 100000);  OUT="$OUTDIR/perf_quick.pcap" ;;
  custom) ARGS=(); OUT="$OUTDIR/perf_custom.pcap" ;;
  *) echo "unknown size '$SIZE' (full|half|quick|custom)" >&2; exit 2 ;;
esac
# --out PATH overrides the output file
EXTRA=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--out" ]; then OUT=$2; shift 2; else EXTRA+=("$1"); shift; fi
done
mkdir -p "$(dirname "$OUT")"
exec "$PYTHON" "$HERE/gen/perf_capture.py" "$OUT" "${ARGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
