#!/usr/bin/env bash
# Build the peer for bench_peers.py: the C++ Wireshark plugin of apache/pulsar-client-cpp (its `wireshark/`
# folder), against this machine's Wireshark headers (Debian: libwireshark-dev), and install it into the
# personal plugin folder of an UNPRIVILEGED user: tshark refuses to load plugins when it runs as root.
#
# usage: benchmarks/build_wireshark_peer.sh [PULSAR_CPP_SRC]
#
#   PULSAR_CPP_SRC        (argument or environment) a checkout or export of apache/pulsar-client-cpp: the
#                         directory holding wireshark/CMakeLists.txt and proto/PulsarApi.proto (the
#                         wireshark/ folder itself is accepted too). Nothing is downloaded: this project does
#                         not ship or fetch the peer's code, the benchmark must work offline.
#   PULSAR_BENCH_USER     the user tshark runs as. Default: `benchuser` when run as root, else yourself.
#   PULSAR_BENCH_CREATE_USER=1   as root, create PULSAR_BENCH_USER (useradd -m) when it does not exist.
#   PULSAR_PEER_BUILD     the build folder (default /tmp/pulsar-peer-build-<uid>); the source is not written.
#
# Needs: cmake, a C++ compiler, pkg-config, glib-2.0, protoc + libprotobuf headers, the Wireshark headers of
# the installed tshark's major.minor version, and tshark. On Debian/Ubuntu:
#   apt-get install -y tshark libwireshark-dev cmake g++ pkg-config libglib2.0-dev protobuf-compiler libprotobuf-dev
#
# Exit status: 0 = built, installed and loaded by tshark (as PULSAR_BENCH_USER); 2 = no source; 3 = a build
# dependency is missing; 4 = the build failed; 5 = cannot install or tshark does not load the plugin.
# The last line printed to stdout is `PLUGIN <path>` on success, `PEER-UNAVAILABLE <reason>` otherwise.
set -u

fail() { # code, reason (one line), details...
    local code=$1 reason=$2
    shift 2
    for l in "$@"; do echo "  $l" >&2; done
    echo "PEER-UNAVAILABLE $reason"
    exit "$code"
}

APT="apt-get install -y tshark libwireshark-dev cmake g++ pkg-config libglib2.0-dev protobuf-compiler libprotobuf-dev"

# ------------------------------------------------------------------------------------------------ source
SRC=${1:-${PULSAR_CPP_SRC:-}}
if [ -z "$SRC" ]; then
    fail 2 "no pulsar-client-cpp source given (argument or PULSAR_CPP_SRC)" \
        "The peer's code is not part of this project and is not downloaded at benchmark time (no network needed)." \
        "Get it once, e.g. 'git clone --depth 1 https://github.com/apache/pulsar-client-cpp', then pass its path."
fi
SRC=$(cd "$SRC" 2>/dev/null && pwd) || fail 2 "source folder ${1:-$PULSAR_CPP_SRC} does not exist"
if [ ! -f "$SRC/wireshark/CMakeLists.txt" ] && [ -f "$SRC/CMakeLists.txt" ] && [ -f "$SRC/pulsarDissector.cc" ]; then
    SRC=$(dirname "$SRC") # the wireshark/ folder itself was given
fi
[ -f "$SRC/wireshark/CMakeLists.txt" ] && [ -f "$SRC/wireshark/pulsarDissector.cc" ] ||
    fail 2 "$SRC has no wireshark/CMakeLists.txt + wireshark/pulsarDissector.cc (not a pulsar-client-cpp tree)"
[ -f "$SRC/proto/PulsarApi.proto" ] ||
    fail 2 "$SRC has no proto/PulsarApi.proto (the plugin's CMakeLists.txt compiles ../proto/PulsarApi.proto)" \
        "An export needs both folders: git archive HEAD wireshark proto | tar -x -C DIR"
REV=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")
echo "peer source: $SRC ($REV)"

# ---------------------------------------------------------------------------------------------- user
ME=$(id -un)
if [ "$(id -u)" = 0 ]; then
    U=${PULSAR_BENCH_USER:-benchuser}
    if ! id "$U" >/dev/null 2>&1; then
        if [ "${PULSAR_BENCH_CREATE_USER:-0}" = 1 ]; then
            useradd -m -s /usr/sbin/nologin "$U" || fail 5 "useradd $U failed"
            echo "created user $U"
        else
            fail 5 "user $U does not exist: tshark must run unprivileged to load plugins" \
                "Create it (PULSAR_BENCH_CREATE_USER=1, or useradd -m $U) or set PULSAR_BENCH_USER to an existing unprivileged user."
        fi
    fi
    [ "$(id -u "$U")" != 0 ] || fail 5 "PULSAR_BENCH_USER=$U is root: tshark does not load plugins as root"
    HOME_U=$(getent passwd "$U" | cut -d: -f6)
    as_user() { setpriv --reuid="$U" --regid="$(id -g "$U")" --init-groups env HOME="$HOME_U" "$@"; }
else
    U=${PULSAR_BENCH_USER:-$ME}
    [ "$U" = "$ME" ] || fail 5 "PULSAR_BENCH_USER=$U but running as $ME: only root can install for another user"
    HOME_U=$HOME
    as_user() { "$@"; }
fi

# ------------------------------------------------------------------------------------------ dependencies
missing=()
for t in cmake pkg-config protoc tshark; do command -v "$t" >/dev/null || missing+=("command $t"); done
command -v c++ >/dev/null || command -v g++ >/dev/null || command -v clang++ >/dev/null || missing+=("a C++ compiler")
if command -v pkg-config >/dev/null; then
    pkg-config --exists glib-2.0 || missing+=("glib-2.0 development files (libglib2.0-dev)")
fi
WS_INC=""
for d in /usr/include /usr/local/include; do
    if [ -f "$d/wireshark/ws_version.h" ] || [ -f "$d/wireshark/config.h" ]; then WS_INC=$d; break; fi
done
[ -n "$WS_INC" ] || missing+=("Wireshark headers: wireshark/ws_version.h (libwireshark-dev)")
PB_OK=""
for d in /usr/include /usr/local/include; do [ -f "$d/google/protobuf/message_lite.h" ] && PB_OK=1; done
[ -n "$PB_OK" ] || missing+=("protobuf headers google/protobuf/message_lite.h (libprotobuf-dev)")
if [ ${#missing[@]} -gt 0 ]; then
    fail 3 "missing build dependencies: ${missing[*]}" "On Debian/Ubuntu: $APT"
fi

# The plugin records the headers' major.minor; tshark only loads a plugin built for its own version.
hdr_ver=$(sed -n 's/^#define VERSION_MAJOR \([0-9]*\).*/\1/p; s/^#define VERSION_MINOR \([0-9]*\).*/\1/p' \
    "$WS_INC/wireshark/ws_version.h" 2>/dev/null | paste -sd. -)
[ -n "$hdr_ver" ] || hdr_ver=$(pkg-config --modversion wireshark 2>/dev/null | cut -d. -f1,2)
ts_ver=$(tshark --version 2>/dev/null | sed -n '1s/^TShark (Wireshark) \([0-9]*\.[0-9]*\).*/\1/p')
echo "wireshark headers: $WS_INC/wireshark (version ${hdr_ver:-?}); tshark ${ts_ver:-?}"
if [ -n "$hdr_ver" ] && [ -n "$ts_ver" ] && [ "$hdr_ver" != "$ts_ver" ]; then
    fail 3 "Wireshark headers are $hdr_ver but tshark is $ts_ver: the plugin would not load" \
        "Install the libwireshark-dev that matches tshark."
fi

# ---------------------------------------------------------------------------------------------- build
B=${PULSAR_PEER_BUILD:-/tmp/pulsar-peer-build-$(id -u)}
mkdir -p "$B" || fail 4 "cannot create build folder $B"
echo "+ cmake -S $SRC/wireshark -B $B -DCMAKE_BUILD_TYPE=Release"
cmake -S "$SRC/wireshark" -B "$B" -DCMAKE_BUILD_TYPE=Release -DWIRESHARK_INCLUDE_PATH="$WS_INC" >"$B/configure.log" 2>&1 ||
    fail 4 "cmake configure failed (see $B/configure.log)" "$(tail -5 "$B/configure.log")"
echo "+ cmake --build $B -j$(nproc 2>/dev/null || echo 2)"
cmake --build "$B" -j"$(nproc 2>/dev/null || echo 2)" >"$B/build.log" 2>&1 ||
    fail 4 "build failed (see $B/build.log)" "$(grep -m5 -i error "$B/build.log")"
SO="$B/pulsar-dissector.so"
[ -f "$SO" ] || fail 4 "the build made no $SO"

# ---------------------------------------------------------------------------------------------- install
PDIR=$(as_user tshark -G folders 2>/dev/null | sed -n 's/^Personal Plugins:[[:space:]]*//p')
[ -n "$PDIR" ] || fail 5 "tshark -G folders (as $U) names no personal plugin folder"
DEST="$PDIR/epan"
if [ "$(id -u)" = 0 ]; then
    # make every missing level of the folder, owned by the user
    p=$DEST
    todo=()
    while [ ! -d "$p" ]; do todo=("$p" "${todo[@]}"); p=$(dirname "$p"); done
    for d in "${todo[@]}"; do install -d -o "$U" -g "$(id -g "$U")" "$d" || fail 5 "cannot create $d"; done
    install -o "$U" -g "$(id -g "$U")" -m 0644 "$SO" "$DEST/" || fail 5 "cannot install into $DEST"
else
    mkdir -p "$DEST" && install -m 0644 "$SO" "$DEST/" || fail 5 "cannot install into $DEST"
fi
echo "installed $DEST/pulsar-dissector.so for user $U"

# ---------------------------------------------------------------------------------------------- verify
if ! as_user tshark -G protocols 2>/dev/null | grep -q "[[:space:]]apache\.pulsar$"; then
    fail 5 "tshark (as $U) does not load $DEST/pulsar-dissector.so" \
        "$(as_user tshark -G plugins 2>&1 | grep -i -m3 'pulsar\|error\|warn')"
fi
echo "tshark (as $U) loads it: protocol apache.pulsar (Pulsar Wire Protocol), on tcp.port 6650"
echo "PLUGIN $DEST/pulsar-dissector.so"
