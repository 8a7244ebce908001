"""The network layers (link -> IP -> TCP) end to end: the shipped corpus in three link types against tshark,
and one pcapng whose interfaces each have their own link type. Each layer's cases (Ethernet, VLANs, LLC/SNAP,
BSD/OpenBSD loopback, raw IP, Linux cooked v1/v2, IPv4 options and fragments, IPv6 extension headers, TCP
options, snaplen cuts, hostile bytes) are cargo tests: crates/engine/tests/net_layers.rs, capture.rs,
capture_reader.rs."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import pcapgen
from framebuild import simple_frame
from pcapgen import ether, ipv4_tcp

from dissector.run import analysed_records

DATA = Path(__file__).resolve().parent.parent / "captures"  # the corpus the project ships
CORPUS = {
    "pcap": DATA / "01_basic_nonbatched.pcap",
    "pcapng": DATA / "01_basic_nonbatched.pcapng",
    "any": DATA / "01_basic_nonbatched.any.pcap",
}


def frames(records: list[dict]) -> list[dict]:
    return [r for r in records if "index" in r]


def test_corpus_three_files_give_the_same_records():
    """.pcap (Ethernet), .pcapng (Ethernet, ns) and .any.pcap (Linux cooked v2) hold the same 71 packets: the
    same records, but for the times (and so the latencies)."""
    recs = {k: list(analysed_records(path)) for k, path in CORPUS.items()}
    assert {k: len(frames(v)) for k, v in recs.items()} == {"pcap": 59, "pcapng": 59, "any": 59}

    def timeless(r: dict) -> dict:
        return {k: v for k, v in r.items() if k not in ("time", "latency_ms")}

    assert [timeless(r) for r in recs["pcap"]] == [timeless(r) for r in recs["pcapng"]] \
        == [timeless(r) for r in recs["any"]]
    for a, b in zip(recs["pcap"], recs["pcapng"]):
        assert abs(a["time"] - b["time"]) < 1e-6
    # The -i any capture came from a second tcpdump process: the kernel stamps each packet socket's copy
    # separately, so its timestamps are up to ~2 us later than the lo capture's.
    for a, c in zip(recs["pcap"], recs["any"]):
        assert abs(a["time"] - c["time"]) < 5e-6
    opened = recs["pcap"][0]
    assert opened["type"] == "CONNECTION_OPENED" and opened["dst"].endswith(":6650")
    assert opened["src"].startswith("127.0.0.1:")
    # the broker's CONNECTED frame carries its version string
    assert any(r["type"] == "CONNECTED" and r["command"]["server_version"] == "Pulsar-Lite-0.1.0"
               for r in frames(recs["pcap"]))


@pytest.mark.skipif(shutil.which("tshark") is None, reason="oracle missing: tshark not installed")
@pytest.mark.parametrize("key", list(CORPUS))
def test_corpus_against_tshark(key):
    """Each frame record's endpoints and time are tshark's for the packet it names."""
    fields = ["frame.number", "frame.time_epoch", "ip.src", "tcp.srcport", "ip.dst", "tcp.dstport", "tcp.len"]
    cmd = ["tshark", "-n", "-r", str(CORPUS[key]), "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = {int(r[0]): r[1:] for r in (line.split("\t") for line in out.splitlines() if line.strip())}
    assert len(rows) == 71
    recs = frames(list(analysed_records(CORPUS[key])))
    assert recs
    for r in recs:
        ts, src, sport, dst, dport, tlen = rows[r["packet"]]
        assert (r["src"], r["dst"]) == (f"{src}:{sport}", f"{dst}:{dport}"), r["index"]
        assert abs(r["time"] - float(ts)) < 1e-6, r["index"]
        assert int(tlen) > 0
    # every packet with TCP payload completes a frame or carries part of one: the frames' bytes are the payload
    payload = {d: sum(int(row[5]) for row in rows.values() if (row[4] == "6650") == (d == "b")) for d in ("b", "c")}
    sent = {d: sum(r["size"] for r in recs if (r["direction"] == "to_broker") == (d == "b")) for d in ("b", "c")}
    assert sent == payload


def sll2(payload: bytes, proto: int) -> bytes:
    return struct.pack("!HHIHBB8s", proto, 0, 1, 772, 0, 6, b"\0" * 8) + payload


def test_pcapng_interfaces_of_different_link_types_carry_one_connection():
    """One TCP connection whose packets come through four pcapng interfaces: Ethernet with a VLAN tag (ns
    timestamps), BSD loopback, Linux cooked v2 (2^-20 s), and a simple packet block on the first interface."""
    client, broker = ("10.0.0.2", 40000), ("10.0.0.1", 6650)
    ping, pong, flow = simple_frame("PING"), simple_frame("PONG"), simple_frame("FLOW", consumer_id=1,
                                                                                 messagePermits=5)

    def tcp(to_broker: bool, seq: int, ack: int, flags: int, payload: bytes = b"") -> bytes:
        (src, sport), (dst, dport) = (client, broker) if to_broker else (broker, client)
        return ipv4_tcp(src, dst, sport, dport, seq, ack, flags, payload)

    data = pcapgen.pcapng_bytes(
        [{"linktype": 1, "tsresol": 9}, {"linktype": 0}, {"linktype": 276, "tsresol": pcapgen.tsresol_pow2(20)}],
        [
            (0, 10.0, ether(tcp(True, 100, 0, 0x02), vlans=[(0x8100, 7)])),
            (1, 10.5, struct.pack(">I", 2) + tcp(False, 500, 101, 0x12)),
            (2, 11.0, sll2(tcp(True, 101, 501, 0x18, ping), 0x0800)),
            (1, 11.5, struct.pack(">I", 2) + tcp(False, 501, 101 + len(ping), 0x18, pong)),
            ("spb", None, ether(tcp(True, 101 + len(ping), 501 + len(pong), 0x18, flow))),
        ],
    )
    recs = list(analysed_records(io.BytesIO(data)))
    got = [(r["type"], r["packet"], r["direction"]) for r in frames(recs)]
    assert got == [("PING", 3, "to_broker"), ("PONG", 4, "to_client"), ("FLOW", 5, "to_broker")]
    assert [r["type"] for r in recs if "index" not in r][0] == "CONNECTION_OPENED"
    assert frames(recs)[1]["answers"] == frames(recs)[0]["index"]
