#!/usr/bin/env bash
# Fuzz the engine's whole Rust pipeline (fuzz/: target `pipeline`, on the engine crate alone) with cargo fuzz, on the stable
# toolchain (-s none: no sanitizer, which would need nightly; coverage, trace-compares and overflow checks
# work on stable).
#
# usage: tools/fuzz/run_core.sh [SECONDS] [extra libFuzzer flags]   (default 60 s; -runs=N for a count)
#        CORE_FUZZ_FAST=1 tools/fuzz/run_core.sh 3600               (--no-trace-compares: ~1.5x the inputs/s)
#
# It installs cargo-fuzz if missing, writes the command tables the target compiles in (from the Python
# declarations) and the seeds (the shipped captures and 8 KiB windows of them), builds, and runs one
# process. The corpus grows in fuzz/corpus/pipeline (kept between runs); a crash, timeout or OOM is
# written to fuzz/artifacts/pipeline/ and the exit status is non-zero: minimise it
# (`cargo fuzz tmin -s none pipeline FILE`), copy it to tests/fuzz_regressions/ once understood.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-60}
[ $# -gt 0 ] && shift
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked
# the tables come from dissector/protocols/*/commands.py; without an environment that imports the package,
# the committed copy is used
PYTHONPATH=. "$PYTHON" tools/fuzz/command_tables.py fuzz/command_tables.json \
  || echo "run_core.sh: command tables not regenerated ($PYTHON cannot import dissector): using the committed copy" >&2
python3 tools/fuzz/core_seeds.py fuzz/corpus/seeds >/dev/null

FLAGS=(-s none)
TARGET_DIR=fuzz/target
if [ -n "${CORE_FUZZ_FAST:-}" ]; then
  FLAGS+=(--no-trace-compares)
  TARGET_DIR=fuzz/target-fast
fi
mkdir -p fuzz/corpus/pipeline fuzz/artifacts/pipeline
CARGO_TARGET_DIR=$TARGET_DIR cargo fuzz build --fuzz-dir fuzz "${FLAGS[@]}" pipeline
TARGET="$TARGET_DIR/$(rustc -vV | sed -n 's/^host: //p')/release/pipeline"
# first every input that ever broke something (each run once): a finding fixed stays fixed in the core too
if ! replayed=$("$TARGET" -timeout=5 -rss_limit_mb=2048 tests/fuzz_regressions/*.pcap* 2>&1); then
  echo "$replayed" >&2
  echo "run_core.sh: an input of tests/fuzz_regressions/ fails again" >&2
  exit 1
fi
exec "$TARGET" \
  -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix=fuzz/artifacts/pipeline/ "$@" fuzz/corpus/pipeline fuzz/corpus/seeds
