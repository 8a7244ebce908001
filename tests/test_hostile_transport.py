"""Hostile captures against the transport and the capture reader (issue 14): memory stays bounded, time stays
linear, and what the reassembly gives up or ignores is said (a problem id or an event), never silent.

Each capture is built here (small packets, made with ``struct`` for speed), run through the command line in a
subprocess, and its peak RSS and time are read from that process alone (``measured.run_measured``).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import framebuild as fb
import pcapgen
from measured import run_measured

SCRIPT = Path(sys.executable).parent / "pulsar-dissect"
RSS_BOUND_MIB = 300
BROKER_PORT = 6650

# flags
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

_ETH = b"\x04" * 6 + b"\x02" * 6 + b"\x08\x00"


def pkt(client: int, seq: int, payload: bytes = b"", flags: int = PSH | ACK, *, to_broker: bool = True,
        ack: int = 0, port: int = BROKER_PORT) -> bytes:
    """Ethernet/IPv4/TCP between client number ``client`` (its own address and port) and the broker. No
    checksums: the reader does not check them, and a hundred thousand packets are built in a second."""
    cip = struct.pack("!I", 0x0A000000 + 0x10000 + client // 60000)  # 10.1.x.x
    cport = 1024 + client % 60000
    bip = b"\x0a\x00\x00\x02"
    src, dst, sport, dport = (cip, bip, cport, port) if to_broker else (bip, cip, port, cport)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 1, 0x4000, 64, 6, 0, src, dst)
    return _ETH + ip + tcp + payload


def write(path: Path, packets, t0: float = 1_700_000_000.0, step: float = 1e-6) -> Path:
    pcapgen.write_pcap(path, [(t0 + i * step, p) for i, p in enumerate(packets)])
    return path


def run(path: Path, *args: str, command: str | None = None) -> tuple[int, str, str, float, float]:
    """(exit code, stdout, stderr, peak RSS in MiB, seconds) of ``pulsar-dissect [command] FILE args``."""
    out_path, err_path = path.with_suffix(".out"), path.with_suffix(".err")
    argv = [str(SCRIPT), *([command] if command else []), str(path), *args]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        rc, rss_kib = run_measured(argv, stdout=out, stderr=err)
        seconds = time.perf_counter() - start
    return rc, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"), rss_kib / 1024, seconds


def records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def events(recs: list[dict], kind: str) -> list[dict]:
    return [r for r in recs if r.get("type") == kind]


def frames(recs: list[dict]) -> list[dict]:
    return [r for r in recs if "index" in r]


def expert_ids(rec: dict) -> list[str]:
    return [e["id"] for e in rec.get("expert") or ()]


PING = fb.simple_frame("PING")
PONG = fb.simple_frame("PONG")


# ------------------------------------------------------------------------------------------------ builders
def held_buffers(connections: int, per_connection: int, seg: int = 1400) -> list[bytes]:
    """Each connection: a PING (which opens it mid-stream), one lost segment, then ``per_connection`` bytes
    beyond the hole, which the reassembly holds until the hole is given up; the connections take turns, so
    that all hold their bytes at once. Then each sends the lost segment and a PONG."""
    filler = b"\x00" * seg
    seq0 = 1000 + len(PING)
    packets = [pkt(c, 1000, PING) for c in range(connections)]
    for k in range(per_connection // seg):
        packets += [pkt(c, seq0 + seg * (k + 1), filler) for c in range(connections)]
    end = seq0 + seg * (per_connection // seg + 1)
    packets += [pkt(c, seq0, filler) for c in range(connections)]
    packets += [pkt(c, end, PONG) for c in range(connections)]
    return packets


def syn_flood(connections: int) -> list[bytes]:
    return [pkt(c, 5000, b"", SYN) for c in range(connections)]


def half_frames(connections: int) -> list[bytes]:
    """Each connection sends the first bytes of a 4 MB SEND and stops."""
    head = fb.raw_frame(fb.command_bytes("SEND", producer_id=1, sequence_id=0), b"\x0e\x01" + b"\x00" * 100,
                        total=4_000_000)
    return [pkt(c, 7000, head[:300]) for c in range(connections)]


def resync_candidate(size: int, seg: int = 1400) -> list[bytes]:
    """A connection captured mid-stream: a PING, a few bytes of garbage, then what looks like a SEND whose
    CommandSend is ``size`` bytes of small fields (a plausible prefix however long) and never ends: the
    resynchronisation waits on that candidate while its bytes come in, up to the end of the capture."""
    sub = b"\x08\x01" * (size // 2)
    cmd = b"\x08\x06\x32" + fb.varint(len(sub) + 1000) + sub  # 1000 bytes of it never come
    frame = struct.pack("!II", len(cmd) + 1000 + 4, len(cmd) + 1000) + cmd
    stream = PING + b"\xff" * 5 + frame
    return [pkt(0, 1000 + i, stream[i:i + seg]) for i in range(0, len(stream), seg)]


def handshake(c: int = 0) -> list[bytes]:
    return [pkt(c, 999, b"", SYN), pkt(c, 499, b"", SYN | ACK, to_broker=False, ack=1000), pkt(c, 1000, b"", ACK, ack=500)]


# ------------------------------------------------------------------------------------------ memory, time
def test_out_of_order_bytes_are_capped_over_all_connections(tmp_path):
    """40 connections each hold 1.4 MB beyond a hole, all at once: under ``max_buffered_total`` the oldest
    holders give up their holes (STATE_DROPPED, GAP "total buffer limit"); what follows still decodes."""
    n = 40
    path = write(tmp_path / "held.pcap", held_buffers(n, 1_400_000))
    rc, out, err, rss_capped, _ = run(path, "--json", "-o", f"max_buffered_total={4 << 20}")
    assert rc == 0 and "Traceback" not in err
    recs = records(out)
    dropped = events(recs, "STATE_DROPPED")
    assert dropped and {d["details"]["option"] for d in dropped} == {"max_buffered_total"}
    assert len(dropped) >= n - 4  # 4 MiB hold fewer than 3 of these connections at a time
    assert sum(1 for g in events(recs, "GAP") if g["details"]["reason"] == "total buffer limit") == len(dropped)
    types = [r["type"] for r in frames(recs)]
    assert types.count("PING") == n and types.count("PONG") == n  # before and after the holes
    # the same capture without the total cap holds 56 MB
    rc, out, err, rss_uncapped, _ = run(path, "--json", "-o", f"max_buffered_total={1 << 30}")
    assert rc == 0 and not events(records(out), "STATE_DROPPED")
    assert rss_capped < rss_uncapped - 30, (rss_capped, rss_uncapped)
    assert rss_capped < RSS_BOUND_MIB


def test_max_buffered_total_is_an_option_refusing_negative_values(tmp_path):
    path = write(tmp_path / "one.pcap", handshake() + [pkt(0, 1000, PING, ack=500)])
    rc, _, err, _, _ = run(path, "--json", "-o", "max_buffered_total=-1")
    assert rc == 2 and "Traceback" not in err


def _timed_pair(tmp_path, name, build, n, *args):
    """(seconds for n, seconds for 2n, the larger peak RSS)."""
    results = []
    for size in (n, 2 * n):
        path = write(tmp_path / f"{name}{size}.pcap", build(size))
        rc, _, err, rss, seconds = run(path, *args)
        assert rc in (0, 1) and "Traceback" not in err, err[-2000:]
        results.append((seconds, rss))
        path.unlink()
    return results[0][0], results[1][0], max(r[1] for r in results)


def test_syn_flood_is_linear_and_bounded(tmp_path):
    """50,000 then 100,000 SYNs, above max_connections: the oldest are forgotten, each in O(1). (The memory of
    65,536 connections tracked at once is the next test's.)"""
    t1, t2, rss = _timed_pair(tmp_path, "syn", syn_flood, 50_000, "--json", "-o", "max_connections=20000")
    assert t2 / t1 < 3, (t1, t2)
    assert rss < RSS_BOUND_MIB, rss


def test_half_finished_frames_on_many_connections_stay_bounded(tmp_path):
    """70,000 connections (more than max_connections) each send the first 300 bytes of a 4 MB SEND and stop; most are still open at the
    end of the capture, whose frames (frame.cut_at_end) are then made a few connections at a time."""
    path = write(tmp_path / "half.pcap", half_frames(70_000))
    rc, out, err, rss, _ = run(path, "--json")
    assert rc == 0 and "Traceback" not in err
    assert rss < RSS_BOUND_MIB, rss
    lines = [line for line in out.splitlines() if '"index"' in line]
    cut = [json.loads(line) for line in lines[:10] + lines[-10:]]
    assert len(lines) == 70_000 and all(r["type"] == "SEND" for r in cut)
    assert all(expert_ids(r)[:1] == ["frame.cut_at_end"] for r in cut)


def test_resynchronisation_waiting_on_a_long_candidate_is_linear(tmp_path):
    """Captured mid-stream: the splitter waits on a candidate frame start while 2 MB (then 4 MB) of it come in,
    1400 bytes a segment; it used to read the candidate again at every segment."""
    t1, t2, rss = _timed_pair(tmp_path, "resync", resync_candidate, 2_000_000, "--json")
    assert t2 / t1 < 3, (t1, t2)
    assert rss < RSS_BOUND_MIB, rss


def test_resynchronisation_still_decodes_around_the_candidate(tmp_path):
    path = write(tmp_path / "resync.pcap", resync_candidate(100_000))
    rc, out, err, _, _ = run(path, "--json")
    recs = records(out)
    assert rc == 0 and [r["type"] for r in frames(recs)] == ["PING"]
    assert events(recs, "TRUNCATED")  # the candidate, never complete, said at the end


# ------------------------------------------------------------------------------------------ silent data loss
def _one_connection(tmp_path, packets) -> list[dict]:
    path = write(tmp_path / "conn.pcap", handshake() + packets)
    rc, out, err, _, _ = run(path, "--json")
    assert rc == 0 and "Traceback" not in err, err
    return records(out)


def test_a_retransmission_with_other_bytes_is_reported(tmp_path):
    recs = _one_connection(tmp_path, [
        pkt(0, 1000, PING, ack=500),
        pkt(0, 1000, PONG, ack=500),  # the same sequence range, other bytes
        pkt(0, 500, PONG, to_broker=False, ack=1013),
        pkt(0, 1013, PING, ack=513),
    ])
    conflict = events(recs, "RETRANSMISSION_CONFLICT")
    assert [(e["offset"], e["length"], e["direction"]) for e in conflict] == [(0, 13, "to_broker")]
    assert [r["type"] for r in frames(recs)] == ["PING", "PONG", "PING"]  # the first copy is decoded


def test_a_conflicting_overlap_of_buffered_bytes_is_reported(tmp_path):
    """Out of order: the second PING arrives, then a different copy of it, then the hole before it fills."""
    recs = _one_connection(tmp_path, [
        pkt(0, 1013, PING, ack=500),
        pkt(0, 1013, PONG, ack=500),
        pkt(0, 1000, PING, ack=500),
    ])
    assert [(e["offset"], e["length"]) for e in events(recs, "RETRANSMISSION_CONFLICT")] == [(13, 13)]
    assert [r["type"] for r in frames(recs)] == ["PING", "PING"]


def test_an_identical_retransmission_is_not_a_conflict(tmp_path):
    recs = _one_connection(tmp_path, [pkt(0, 1000, PING, ack=500), pkt(0, 1000, PING, ack=500)])
    assert not events(recs, "RETRANSMISSION_CONFLICT")
    assert [r["type"] for r in frames(recs)] == ["PING"]


def test_data_on_a_rst_is_reported(tmp_path):
    recs = _one_connection(tmp_path, [
        pkt(0, 1000, PING, ack=500),
        pkt(0, 500, PONG, to_broker=False, ack=1013),
        pkt(0, 1013, PING, RST | ACK, ack=513),  # a whole frame on the RST: never part of the stream
    ])
    rst = events(recs, "DATA_ON_RST")
    assert [(e["offset"], e["length"], e["direction"]) for e in rst] == [(13, 13, "to_broker")]
    assert [r["type"] for r in frames(recs)] == ["PING", "PONG"]
    assert events(recs, "CONNECTION_CLOSED")[0]["details"]["how"] == "rst"


def test_data_after_fin_is_reported(tmp_path):
    recs = _one_connection(tmp_path, [
        pkt(0, 1000, PING, PSH | ACK | FIN, ack=500),  # the last frame with the FIN
        pkt(0, 1014, PING, ack=500),  # bytes after the FIN (its sequence number is 1013)
        pkt(0, 500, PONG, to_broker=False, ack=1014),
    ])
    after = events(recs, "DATA_AFTER_FIN")
    assert [(e["offset"], e["length"]) for e in after] == [(14, 13)]
    assert [r["type"] for r in frames(recs)] == ["PING", "PONG"]


def test_data_buffered_beyond_a_later_fin_is_reported(tmp_path):
    """Bytes beyond a hole are buffered, then a FIN comes before them: they were never part of the stream."""
    recs = _one_connection(tmp_path, [
        pkt(0, 1030, PING, ack=500),
        pkt(0, 1000, PING, PSH | ACK | FIN, ack=500),
    ])
    assert [(e["offset"], e["length"]) for e in events(recs, "DATA_AFTER_FIN")] == [(30, 13)]
    assert [r["type"] for r in frames(recs)] == ["PING"]


# ------------------------------------------------------------------------------------------ capture files
def _conversation() -> list[bytes]:
    """A connection with a handshake, PING → and PONG ←: the frames every hostile file below starts with."""
    return handshake() + [pkt(0, 1000, PING, ack=500), pkt(0, 500, PONG, to_broker=False, ack=1013)]


def _pcap(tail: bytes = b"", snaplen: int = 262144) -> bytes:
    return pcapgen.pcap_bytes([(1_700_000_000 + i * 0.001, p) for i, p in enumerate(_conversation())],
                              snaplen=snaplen) + tail


def _pcapng(extra_blocks=(), tail: bytes = b"", tsoffset: int | None = None) -> bytes:
    """With ``tsoffset``: the interface's offset is that many seconds (negative: before 1970 by far), the
    packets' own stamps unchanged."""
    return (pcapgen.shb() + pcapgen.idb(tsoffset=tsoffset) + b"".join(extra_blocks)
            + b"".join(pcapgen.epb(0, 1_700_000_000 + i * 0.001, p) for i, p in enumerate(_conversation())) + tail)


def _record(incl_len: int, body: bytes = b"x" * 100, sec: int = 1_700_000_001) -> bytes:
    return struct.pack("<IIII", sec, 0, incl_len, incl_len) + body


_LATE_PING = pkt(0, 1013, PING, ack=513)
_AFTER = struct.pack("<IIII", 1_700_000_002, 0, len(_LATE_PING), len(_LATE_PING)) + _LATE_PING

HOSTILE_FILES = {
    # record lengths no file can hold: nothing allocated for them, the capture ends there
    "pcap_incl_len_2GB": (lambda: _pcap(_record(0x7FFFFFFF)), "pcap", ["PING", "PONG"], "CAPTURE_TRUNCATED"),
    "pcap_incl_len_4GB": (lambda: _pcap(_record(0xFFFFFFFF)), "pcap", ["PING", "PONG"], "CAPTURE_TRUNCATED"),
    "pcap_record_60MB_in_a_small_file": (lambda: _pcap(_record(60_000_000)), "pcap", ["PING", "PONG"],
                                         "CAPTURE_TRUNCATED"),
    "pcap_cut_inside_a_record": (lambda: _pcap(_AFTER[:30]), "pcap", ["PING", "PONG"], "CAPTURE_TRUNCATED"),
    "pcap_garbage_after_the_records": (lambda: _pcap(bytes(range(256)) * 40), "pcap", ["PING", "PONG"],
                                       "CAPTURE_TRUNCATED"),
    "pcap_garbage_after_the_header": (lambda: _pcap()[:24] + bytes(range(256)) * 40, "pcap", [],
                                      "CAPTURE_TRUNCATED"),
    # a timestamp at the end of the 32-bit range, and records after it still read
    "pcap_timestamp_out_of_range": (lambda: _pcap(_record(len(_LATE_PING), _LATE_PING, sec=0xFFFFFFFF)), "pcap",
                                    ["PING", "PONG", "PING"], None),
    "pcapng_block_length_4GB": (lambda: _pcapng(tail=struct.pack("<II", 6, 0xFFFFFFFF) + b"\0" * 200), "pcapng",
                                ["PING", "PONG"], "CAPTURE_TRUNCATED"),
    "pcapng_unknown_huge_block": (lambda: _pcapng(tail=struct.pack("<II", 0x4242, 0x7FFFFFF0) + b"\0" * 200),
                                  "pcapng", ["PING", "PONG"], "CAPTURE_TRUNCATED"),
    "pcapng_unknown_blocks_between_packets": (
        lambda: _pcapng(extra_blocks=[pcapgen.block(0x4242, b"\1" * 5000)] * 50), "pcapng", ["PING", "PONG"],
        "CAPTURE_NOTE"),
    "pcapng_negative_tsoffset": (lambda: _pcapng(tsoffset=-(1 << 62)), "pcapng", ["PING", "PONG"], None),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_FILES))
def test_hostile_capture_files_decode_what_is_there(tmp_path, case):
    make, ext, types, event = HOSTILE_FILES[case]
    path = tmp_path / f"{case}.{ext}"
    path.write_bytes(make())
    rc, out, err, rss, seconds = run(path, "--json")
    assert "Traceback" not in err, err
    assert rc == 0, (rc, err)
    recs = records(out)
    assert [r["type"] for r in frames(recs)] == types
    if event is not None:
        assert events(recs, event), [r.get("type") for r in recs]
    assert rss < 100 and seconds < 30, (rss, seconds)
    rc, out, err, _, _ = run(path, "--json", command="stats")
    assert rc == 0 and "Traceback" not in err and json.loads(out)


def test_snaplen_cut_packets_decode_what_is_there_and_say_so(tmp_path):
    """A snaplen of 80 bytes (54 of headers): the SEND is cut, said (a GAP of reason snaplen and the frame's
    finding), and the PING after it still decodes."""
    send = fb.send_frame(b"x" * 200)
    packets = handshake() + [pkt(0, 1000, send, ack=500), pkt(0, 1000 + len(send), PING, ack=500)]
    cut = [(1_700_000_000 + i * 0.001, p[:80], len(p)) for i, p in enumerate(packets)]
    path = tmp_path / "snap.pcap"
    pcapgen.write_pcap(path, cut, snaplen=80)
    rc, out, err, _, _ = run(path, "--json")
    assert rc == 0 and "Traceback" not in err
    recs = records(out)
    assert [g["details"]["reason"] for g in events(recs, "GAP")] == ["snaplen"]
    send_rec, ping_rec = frames(recs)
    assert send_rec["type"] == "SEND" and "frame.gap_damaged" in expert_ids(send_rec)
    assert ping_rec["type"] == "PING"
    rc, _, _, _, _ = run(path, "--json", "--strict")
    assert rc == 1  # the warnings count with --strict


# ------------------------------------------------------------------------------------ stats under a flood
def test_stats_under_a_syn_flood_lists_a_bounded_number_of_connections(tmp_path):
    """`stats` kept a few KB for every connection ever seen (100,000 SYNs: 459 MiB). It lists at most
    ``max_stats_connections`` and counts the rest."""
    path = write(tmp_path / "syn.pcap", syn_flood(100_000))
    rc, out, err, rss, _ = run(path, "--json", "-o", "max_stats_connections=1000", command="stats")
    assert rc == 0 and "Traceback" not in err, err[-2000:]
    data = json.loads(out)
    assert len(data["connections"]) == 1000
    assert data["connections_dropped"] == 100_000 - 1000
    assert rss < RSS_BOUND_MIB, rss


def test_stats_forgets_closed_connections_first(tmp_path):
    """Connection 0 closes early; 1 and 2 stay open: with room for two, 0 goes, although it is the oldest
    of the three either way, and 1 stays although older than 2. Without a cap all three are listed."""
    packets = handshake(0) + [pkt(0, 1000, PING, ack=500), pkt(0, 1000 + len(PING), b"", FIN | ACK, ack=500),
                              pkt(0, 500, b"", FIN | ACK, to_broker=False, ack=1001 + len(PING))]
    packets += handshake(1) + [pkt(1, 1000, PING, ack=500)] + handshake(2) + [pkt(2, 1000, PING, ack=500)]
    packets += [pkt(1, 500, PONG, to_broker=False, ack=1000 + len(PING))]  # 1 busy again after 2 came
    path = write(tmp_path / "three.pcap", packets)
    rc, out, err, _, _ = run(path, "--json", command="stats")
    assert rc == 0 and "Traceback" not in err
    everything = json.loads(out)
    assert len(everything["connections"]) == 3 and "connections_dropped" not in everything
    closed = [c["conn"] for c in everything["connections"] if c.get("closed") == "fin"]
    assert len(closed) == 1
    rc, out, err, _, _ = run(path, "--json", "-o", "max_stats_connections=2", command="stats")
    capped = json.loads(out)
    assert capped["connections_dropped"] == 1
    assert sorted(c["conn"] for c in capped["connections"]) == sorted(
        c["conn"] for c in everything["connections"] if c["conn"] not in closed)
    rc, out, err, _, _ = run(path, "-o", "max_stats_connections=2", command="stats")
    assert rc == 0 and "Traceback" not in err and "3 connection(s)" in out
