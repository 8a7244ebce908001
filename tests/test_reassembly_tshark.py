"""Independent check of dissector.transport.reassembly against tshark's ``follow,tcp,raw``.

For each capture, every TCP stream is reassembled by our code (capture -> netlayers -> reassembly) and by
tshark, and both directions' byte streams must be identical. Skipped when tshark is not installed.
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

from corpus import CAPTURES
from dissector.capture.files import open_capture
from dissector.capture.netlayers import iter_tcp_segments
from dissector.transport.reassembly import ConnectionOpened, StreamData, StreamGap, TcpReassembler


# Explicit MAC addresses: scapy would otherwise look them up (routes, ARP), which is slow.
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}

TSHARK = shutil.which("tshark")

pytestmark = pytest.mark.skipif(TSHARK is None, reason="oracle missing: tshark not installed")

# Every capture the project ships (real broker + official client), pcap, pcapng and Linux-cooked alike.
CORPUS = sorted(p.name for p in CAPTURES.iterdir() if ".pcap" in p.name)


def ours(path):
    """{conn id: (conn, {endpoint str: bytes})} and the reassembler, from our pipeline stages."""
    r = TcpReassembler()
    conns: dict[int, tuple] = {}

    def take(events):
        for ev in events:
            if isinstance(ev, ConnectionOpened):
                conns[ev.conn.id] = (ev.conn, {str(ev.conn.a): [], str(ev.conn.b): []})
            elif isinstance(ev, StreamData):
                conns[ev.conn.id][1][str(ev.sender)].append(ev.data)
            elif isinstance(ev, StreamGap):
                raise AssertionError(f"unexpected gap {ev}")

    with open_capture(path) as cap:
        for seg in iter_tcp_segments(cap):
            take(r.feed(seg))
    take(r.finish())
    return {cid: (c, {k: b"".join(v) for k, v in d.items()}) for cid, (c, d) in conns.items()}, r


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


def compare(path):
    mine, r = ours(path)
    theirs = tshark_streams(path)
    assert len(mine) == len(theirs), f"{len(mine)} connections vs tshark's {len(theirs)} streams"
    for (cid, (conn, dirs)), t in zip(sorted(mine.items()), theirs):
        assert set(t["nodes"]) == {str(conn.a), str(conn.b)}, (cid, t["nodes"])
        for ep in t["nodes"]:
            assert dirs[ep] == t[ep], f"stream {cid} from {ep}: {len(dirs[ep])} bytes vs tshark {len(t[ep])}"
    return mine, r


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_matches_tshark(name):
    mine, r = compare(CAPTURES / name)
    assert mine
    assert r.stats.gaps == 0
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

    def rb(n):
        return bytes(rng.getrandbits(8) for _ in range(n))

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
    wrpcap(str(path), _frames(random.Random(42)))
    mine, r = compare(path)
    assert len(mine) == 5
    assert r.stats.out_of_order_segments > 0 and r.stats.retransmitted_bytes > 0
