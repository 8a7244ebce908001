"""What the fuzzer checks on one input, without atheris: shared by the fuzzer (tools/fuzz/fuzz_capture.py)
and the regression tests (tests/test_fuzz_regressions.py), which replay every input that ever broke something.

One input is a capture file (pcap, pcapng, gzip or not). It runs through what users run: the reader, TCP
reassembly, framing, decoding and the analysis of both protocols, into the JSON lines and the statistics, and
``check_input`` raises when something that must always hold does not: no exception other than the reader's
"not a capture" error, every JSON line valid JSON with no raw control, DEL, C1, bidi or line-separator
character (escaped as \\uXXXX instead), the statistics likewise.

``mutate_structured`` is the structure-aware half of the fuzzer's mutations: inside a classic pcap it finds a
TCP payload and rewrites, in place, the fields a hostile peer would lie about: Pulsar's TOTAL_SIZE, CMD_SIZE,
magic, checksum and metadata size, a varint inside the command or metadata (counts, sizes, compression, chunk
fields), TubeMQ's begin token, serial, list size and block lengths.
"""

from __future__ import annotations

import io
import json
import random
import struct

from dissector.capture.files import CaptureError
from dissector.options import Options
from dissector.output.jsonl import dumps
from dissector.output.stats import StatsCollector
from dissector.run import analysed_json_lines, analysed_records

# What no output line may hold raw: C0 controls but tab, DEL, C1 controls, bidi controls, line separators.
FORBIDDEN = {chr(c) for c in range(0x20) if c != 0x09} | {"\x7f"} | {chr(c) for c in range(0x80, 0xA0)} \
    | set("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Small caps, so that an input claiming a huge size is cut early and the fuzzer stays fast.
OPTIONS = Options(max_decompressed=1 << 20, max_connections=64, max_pending_requests=256)

INTERESTING_U32 = (0, 1, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE,
                   0xFFFFFFFF, 5 * 1024 * 1024, 5 * 1024 * 1024 + 10 * 1024 + 1)
INTERESTING_VARINT = (0, 1, 2, 127, 128, 1000, 65535, 1 << 20, 10_000_000, 1 << 31, 1 << 32, (1 << 63) - 1,
                      (1 << 64) - 1)
PULSAR_MAGIC = b"\x0e\x01"
TUBEMQ_TOKEN = b"\xff\x7f\xf4\xfe"


def check_text(text: str, where: str) -> None:
    bad = FORBIDDEN.intersection(text)
    if bad:
        raise AssertionError(f"{where} holds raw {sorted(hex(ord(c)) for c in bad)}: {text[:200]!r}")


def check_line(line: bytes, where: str) -> None:
    """One JSON line as written: valid JSON, one line however Python splits it, nothing raw to hide."""
    text = line.decode("utf-8").rstrip("\n")
    check_text(text, where)
    json.loads(text)


def check_input(data: bytes) -> None:
    for run in (run_json, run_stats):
        try:
            run(data)
        except CaptureError:
            return  # not a capture at all: the one error the reader may raise


def run_json(data: bytes) -> None:
    for item in analysed_json_lines(io.BytesIO(data), OPTIONS):
        if type(item) is bytes:
            text = item.decode("utf-8")  # the core writes UTF-8 only
            for line in text.split("\n")[:-1]:
                check_line(line.encode(), "a frame's JSON line")
        else:
            check_line(dumps(item), "an event's JSON line")


def run_stats(data: bytes) -> None:
    """As `stats` counts: every record into the core's statistics, the events back here too."""
    stats = StatsCollector(OPTIONS)
    for _ in analysed_records(io.BytesIO(data), OPTIONS, summary=True, stats=stats.core):
        pass
    check_line(dumps(stats.result()), "the statistics' JSON")


# --------------------------------------------------------------------------------------- structured mutation
def pcap_payloads(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of the TCP payloads of an Ethernet/IPv4 classic pcap (little-endian), or []."""
    if len(data) < 24 or data[:4] not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        return []
    linktype = struct.unpack_from("<I", data, 20)[0]
    found, at = [], 24
    while at + 16 <= len(data) and len(found) < 4096:
        incl = struct.unpack_from("<I", data, at + 8)[0]
        start, end = at + 16, min(at + 16 + incl, len(data))
        link = 14 if linktype == 1 else 16 if linktype == 113 else 4 if linktype == 0 else 0
        ip = start + link
        if end > ip + 20 and data[ip] >> 4 == 4:
            tcp = ip + (data[ip] & 15) * 4
            if end > tcp + 13 and data[ip + 9] == 6:
                payload = tcp + (data[tcp + 12] >> 4) * 4
                if payload < end:
                    found.append((payload, end))
        at = start + incl
    return found


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def mutate_structured(data: bytes, rng: random.Random) -> bytes | None:
    payloads = pcap_payloads(data)
    if not payloads:
        return None
    start, end = rng.choice(payloads)
    out = bytearray(data)
    kind = rng.randrange(5)
    u32 = struct.pack(">I", rng.choice(INTERESTING_U32))
    if kind == 0 and end - start >= 8:  # TOTAL_SIZE or CMD_SIZE of a frame starting the segment
        at = start + rng.choice((0, 4))
        out[at:at + 4] = u32
    elif kind == 1 and (m := data.find(PULSAR_MAGIC, start, end)) >= 0:  # magic, checksum, metadata size
        at = m + rng.choice((0, 2, 6))
        out[at:at + 4] = (u32 if at != m else bytes([rng.randrange(256), rng.randrange(256)]) + data[m + 2:m + 4])
    elif kind == 2 and (t := data.find(TUBEMQ_TOKEN, start, end)) >= 0:  # serial, list size, block length
        at = t + rng.choice((4, 8, 12))
        out[at:at + 4] = u32
    elif end - start > 8:  # a varint somewhere in the command or the metadata: a count, a size, an enum
        at = rng.randrange(start + 8, end)
        value = varint(rng.choice(INTERESTING_VARINT))
        out[at:at + len(value)] = value
    else:
        return None
    return bytes(out[:len(data)])  # sizes unchanged: a varint written past a record's end touches the next

