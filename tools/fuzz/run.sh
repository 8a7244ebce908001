#!/usr/bin/env bash
# Fuzz the whole pipeline from raw capture bytes with the engine's branches visible to libFuzzer.
#
# usage: tools/fuzz/run.sh [SECONDS] [extra libFuzzer flags]     (default 60 s; -runs=N for a count instead)
#
# It builds, once, a second environment (.fuzz-venv, target dir .fuzz-target) whose package is installed (not
# editable: its extension must not replace the one in the source tree) with the engine compiled with
# sanitizer coverage (the flags cargo-fuzz passes, on the stable toolchain; CARGO_BUILD_TARGET keeps them off
# the build scripts), installs atheris there, writes the shipped captures as seeds, and runs
# tools/fuzz/fuzz_capture.py. The corpus grows in .fuzz-corpus/ (kept between runs); a crash is written to
# .fuzz-crashes/ and the exit status is non-zero: copy it to tests/fuzz_regressions/ once understood.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-60}
[ $# -gt 0 ] && shift
VENV=.fuzz-venv
if [ ! -x "$VENV/bin/python" ] || [ ! -e "$VENV/.built" ] || [ -n "$(find crates dissector cli Cargo.toml -newer "$VENV/.built" 2>/dev/null | head -1)" ]; then
  python3 -m venv "$VENV"
  CARGO_BUILD_TARGET=$(rustc -vV | sed -n 's/^host: //p') CARGO_TARGET_DIR=.fuzz-target \
  RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=3 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares" \
    "$VENV/bin/pip" install -q . atheris
  touch "$VENV/.built"
fi
mkdir -p .fuzz-corpus .fuzz-crashes .fuzz-seeds
"$VENV/bin/python" tools/fuzz/fuzz_capture.py --seeds .fuzz-seeds
exec "$VENV/bin/python" tools/fuzz/fuzz_capture.py -max_total_time="$SECONDS_TO_RUN" -max_len=300000 -timeout=20 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=.fuzz-crashes/ "$@" .fuzz-corpus .fuzz-seeds
