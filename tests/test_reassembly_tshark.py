"""Independent check of the TCP reassembly against tshark's ``follow,tcp,raw``, end to end.

Each capture is dissected by the real pipeline (``dissect_file`` with ``Options(keep_frame_bytes=True)``): the
frames' bytes of each connection and direction, in stream order, must be exactly the bytes tshark follows on
that stream, and no bytes may be lost (no GAP, SKIPPED or TRUNCATED event): the captures carry nothing but
Pulsar or TubeMQ frames, so framed bytes are stream bytes. Skipped when tshark is not installed.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

import framebuild as fb
from corpus import CAPTURES
from dissector.model import Event, Frame
from dissector.options import Options
from dissector.pipeline import dissect_file


# Explicit MAC addresses: scapy would otherwise look them up (routes, ARP), which is slow.
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}

TSHARK = shutil.which("tshark")

pytestmark = pytest.mark.skipif(TSHARK is None, reason="oracle missing: tshark not installed")

# Every capture the project ships (real broker + official client), pcap, pcapng and Linux-cooked alike.
CORPUS = sorted(p.name for p in CAPTURES.iterdir() if ".pcap" in p.name)

LOSS = ("GAP", "SKIPPED", "TRUNCATED", "BAD_SIZE", "OVERSIZED")


def ours(path, ooo_wait_packets: int = Options().ooo_wait_packets) -> dict[int, dict[str, bytes]]:
    """{conn id: {endpoint "ip:port": the bytes it sent}}, from the frames the real pipeline made."""
    conns: dict[int, dict[str, list[tuple[int, bytes]]]] = {}
    for item in dissect_file(path, Options(keep_frame_bytes=True, ooo_wait_packets=ooo_wait_packets)):
        if type(item) is Event and item.kind == "CONNECTION_OPENED":
            conns[item.conn] = {item.src: [], item.dst: []}
        elif type(item) is Event:
            assert item.kind not in LOSS, f"{item.kind} on connection {item.conn}: {item}"
        elif type(item) is Frame:
            conns[item.conn][item.src].append((item.offset, item.data))
    out = {}
    for cid, sides in conns.items():
        out[cid] = {}
        for ep, parts in sides.items():
            parts.sort()
            offset = 0
            for at, data in parts:
                assert at == offset, f"connection {cid} from {ep}: a frame at {at}, the stream was at {offset}"
                offset += len(data)
            out[cid][ep] = b"".join(data for _, data in parts)
    return out


def tshark_streams(path) -> list[dict]:
    """tshark's view: one dict per tcp.stream index: {"nodes": [ep0, ep1], ep0: bytes, ep1: bytes}."""
    base = [TSHARK, "-n", "-r", str(path), "-o", "tcp.reassemble_out_of_order:TRUE"]
    idx = subprocess.run(base + ["-T", "fields", "-e", "tcp.stream"], capture_output=True, text=True, check=True)
    n = max((int(x) for x in idx.stdout.split() if x.strip()), default=-1) + 1
    if n == 0:
        return []
    args = base + ["-q"]
    for i in range(n):
        args += ["-z", f"follow,tcp,raw,{i}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    res: dict[int, dict] = {}
    cur = None
    for line in out.splitlines():
        if line.startswith("Follow:"):
            cur = {"nodes": [], "parts": {}}
        elif cur is None or not line.strip() or line.startswith("===="):
            continue
        elif line.startswith("Filter:"):
            res[int(line.rsplit(" ", 1)[1])] = cur
        elif line.startswith("Node "):
            ep = line.split(": ", 1)[1]
            cur["nodes"].append(ep)
            cur["parts"][ep] = []
        else:
            ep = cur["nodes"][1] if line.startswith("\t") else cur["nodes"][0]
            cur["parts"][ep].append(bytes.fromhex(line.strip()))
    assert sorted(res) == list(range(n))
    streams = []
    for i in range(n):
        c = res[i]
        d = {"nodes": c["nodes"]}
        for ep in c["nodes"]:
            d[ep] = b"".join(c["parts"][ep])
        streams.append(d)
    return streams


def compare(path, **options) -> dict[int, dict[str, bytes]]:
    mine = ours(path, **options)
    theirs = tshark_streams(path)
    assert len(mine) == len(theirs), f"{len(mine)} connections vs tshark's {len(theirs)} streams"
    for (cid, dirs), t in zip(sorted(mine.items()), theirs):
        assert set(t["nodes"]) == set(dirs), (cid, t["nodes"])
        for ep in t["nodes"]:
            assert dirs[ep] == t[ep], f"stream {cid} from {ep}: {len(dirs[ep])} bytes vs tshark {len(t[ep])}"
    return mine


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_matches_tshark(name):
    mine = compare(CAPTURES / name)
    assert mine and any(any(sides.values()) for sides in mine.values())
    if name == "11_errors.pcap":
        assert len(mine) == 14


# ----------------------------------------------------------------------------------------------- synthetic


def _frames(rng):
    """Several connections with reordering, retransmissions, overlaps, wrap-around and 4-tuple reuse."""
    per_conn = []

    def conn(cport, cisn, sisn, up, down, size, window, dups):
        c, s = ("10.1.0.1", cport), ("10.1.0.2", 6650)

        def pkt(frm, flags, seq, ack, payload=b""):
            (sip, sp), (dip, dp) = (c, s) if frm == "c" else (s, c)
            p = Ether(**MACS) / IP(src=sip, dst=dip) / TCP(sport=sp, dport=dp, seq=seq % 2**32, ack=ack % 2**32, flags=flags)
            return p / Raw(payload) if payload else p

        hs = [pkt("c", "S", cisn, 0), pkt("s", "SA", sisn, cisn + 1), pkt("c", "A", cisn + 1, sisn + 1)]
        body = []
        for frm, stream, isn, peer in (("c", up, cisn, sisn), ("s", down, sisn, cisn)):
            off = 0
            while off < len(stream):
                n = rng.randint(1, size)
                body.append(pkt(frm, "PA", isn + 1 + off, peer + 1, stream[off : off + n]))
                off += n
        rng.shuffle(body)
        for _ in range(dups):  # retransmissions and overlapping re-segmentations
            frm, stream, isn, peer = rng.choice([("c", up, cisn, sisn), ("s", down, sisn, cisn)])
            lo = rng.randrange(len(stream))
            hi = min(len(stream), lo + rng.randint(1, 2 * size))
            body.insert(rng.randint(len(body) // 2, len(body)), pkt(frm, "PA", isn + 1 + lo, peer + 1, stream[lo:hi]))
        keyed = sorted((i + rng.uniform(0, window), i, p) for i, p in enumerate(body))
        body = [p for _k, _i, p in keyed]
        fins = [
            pkt("c", "FA", cisn + 1 + len(up), sisn + 1 + len(down)),
            pkt("s", "FA", sisn + 1 + len(down), cisn + 2 + len(up)),
            pkt("c", "A", cisn + 2 + len(up), sisn + 2 + len(down)),
        ]
        return hs + body + fins

    pool = [fb.simple_frame("PING"), fb.simple_frame("FLOW", consumer_id=3, messagePermits=1000),
            fb.simple_frame("PRODUCER", topic="persistent://public/default/t", producer_id=1, request_id=1),
            fb.send_frame(b"payload " * 20, sequence_id=1), fb.message_frame(b"m" * 300, entry_id=7)]

    def rb(n):
        """Pulsar frames, at least ``n`` bytes of them."""
        out = b""
        while len(out) < n:
            out += rng.choice(pool)
        return out

    per_conn.append(conn(41000, 2**32 - 700, 2**32 - 3, rb(5000), rb(3000), 400, 4, 4))
    per_conn.append(conn(41001, 12345, 999, rb(2000), rb(20000), 1400, 3, 6))
    per_conn.append(conn(41002, 7, 2**31, rb(300), rb(300), 1, 1, 0))
    first = conn(41003, 1000, 5000, rb(1500), rb(800), 300, 3, 2)
    again = conn(41003, 900_000_000, 77, rb(900), rb(400), 200, 2, 2)  # same 4-tuple, after the FINs
    per_conn.append(first + again)
    frames = []
    queues = [list(q) for q in per_conn]
    while any(queues):
        q = rng.choice([q for q in queues if q])
        frames.append(q.pop(0))
    for i, f in enumerate(frames):
        f.time = 1_700_000_000 + i * 0.0001
    return frames


def test_synthetic_reordered_capture_matches_tshark(tmp_path):
    path = tmp_path / "synthetic.pcap"
    packets = _frames(random.Random(42))
    # the capture does reorder and retransmit: a data segment below the highest sequence number sent before it
    highest: dict[tuple, int] = {}
    behind = 0
    for p in packets:
        if p.haslayer(Raw):
            key = (p[IP].src, p[TCP].sport, p[TCP].dport)
            behind += p[TCP].seq < highest.get(key, -1) and highest[key] - p[TCP].seq < 2**31
            highest[key] = max(highest.get(key, -1), p[TCP].seq)
    assert behind > 0
    wrpcap(str(path), packets)
    # one connection comes in 1-byte segments all shuffled: its holes wait longer than the default allows
    assert len(compare(path, ooo_wait_packets=100_000)) == 5
