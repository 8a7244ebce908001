"""Tests for dissector.capture (pcap / pcapng / gzip reading)."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import pcapgen  # noqa: E402

from dissector.capture.files import CapturedPacket, CaptureError, open_capture  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "captures"  # the corpus the project ships
CORPUS = {
    "pcap": DATA / "01_basic_nonbatched.pcap",
    "pcapng": DATA / "01_basic_nonbatched.pcapng",
    "any": DATA / "01_basic_nonbatched.any.pcap",
}
MANIFEST = DATA / "01_basic_nonbatched.json"


def read_all(source):
    with open_capture(source) as r:
        pkts = list(r)
    return r, pkts


def frames(n, size=60, t0=1_700_000_000.0, step=0.001):
    """n distinct (ts, bytes) pairs."""
    return [(t0 + i * step, bytes([i & 0xFF]) * 6 + struct.pack("!I", i) + bytes(size - 10)) for i in range(n)]


def check_same(pkts, expected, tol=1e-6):
    assert len(pkts) == len(expected)
    for i, (p, e) in enumerate(zip(pkts, expected), 1):
        assert isinstance(p, CapturedPacket)
        assert p.index == i
        assert abs(p.timestamp - e[0]) < tol, (i, p.timestamp, e[0])
        assert p.data == e[1]
        assert p.orig_len == (e[2] if len(e) > 2 else len(e[1]))


# ------------------------------------------------------------------------------------------------ corpus
@pytest.mark.parametrize(
    "key,fmt,linktype,tool",
    [("pcap", "pcap", 1, "tcpdump"), ("pcapng", "pcapng", 1, "dumpcap"), ("any", "pcap", 276, "tcpdump_any")],
)
def test_corpus_files(key, fmt, linktype, tool):
    manifest = json.loads(MANIFEST.read_text())
    r, pkts = read_all(CORPUS[key])
    assert r.format == fmt
    assert r.compressed is False
    assert r.truncated is None
    assert r.problems == []
    assert len(pkts) == 71 == manifest["capture_files"][tool]["packets_captured"]
    assert r.packets == 71
    assert [p.index for p in pkts] == list(range(1, 72))
    assert {p.linktype for p in pkts} == {linktype}
    assert all(len(p.data) == p.orig_len for p in pkts)  # -s 0: nothing cut
    ts = [p.timestamp for p in pkts]
    assert ts == sorted(ts)
    assert 1.7e9 < ts[0] < 2.0e9


def test_corpus_pcap_and_pcapng_hold_the_same_frames():
    _, a = read_all(CORPUS["pcap"])
    _, b = read_all(CORPUS["pcapng"])
    assert [p.data for p in a] == [p.data for p in b]
    assert all(abs(x.timestamp - y.timestamp) < 1e-6 for x, y in zip(a, b))


def test_corpus_frame_bytes_match_manifest():
    """Ethernet frame bytes per direction equal tshark's conversation table in the manifest."""
    conv = json.loads(MANIFEST.read_text())["tcp_conversations_tshark"][0]
    _, pkts = read_all(CORPUS["pcap"])
    a_port = int(conv["a"].rsplit(":", 1)[1]).to_bytes(2, "big")
    a_to_b = [p for p in pkts if p.data[34:36] == a_port]  # Ethernet + 20-byte IPv4 header -> TCP sport
    b_to_a = [p for p in pkts if p.data[34:36] != a_port]
    assert len(a_to_b) == conv["frames_a_to_b"] and len(b_to_a) == conv["frames_b_to_a"]
    assert f"{sum(p.orig_len for p in a_to_b)} bytes" == conv["bytes_a_to_b"]
    assert f"{sum(p.orig_len for p in b_to_a)} bytes" == conv["bytes_b_to_a"]


@pytest.mark.parametrize("key", ["pcap", "pcapng"])
def test_corpus_against_scapy_reader(key):
    from scapy.utils import PcapNgReader, PcapReader

    cls = PcapReader if key == "pcap" else PcapNgReader
    with cls(str(CORPUS[key])) as sr:
        theirs = [(float(p.time), bytes(p)) for p in sr]
    _, ours = read_all(CORPUS[key])
    assert len(ours) == len(theirs)
    for p, (t, b) in zip(ours, theirs):
        assert p.data == b
        assert abs(p.timestamp - t) < 1e-6


@pytest.mark.skipif(shutil.which("tshark") is None, reason="oracle missing: tshark not installed")
@pytest.mark.parametrize("key", ["pcap", "pcapng", "any"])
def test_corpus_against_tshark(key):
    out = subprocess.run(
        ["tshark", "-n", "-r", str(CORPUS[key]), "-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch",
         "-e", "frame.len", "-e", "frame.cap_len"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")
    rows = [line.split("\t") for line in out if line.strip()]
    _, pkts = read_all(CORPUS[key])
    assert len(pkts) == len(rows) == 71
    for p, (num, ts, flen, caplen) in zip(pkts, rows):
        assert p.index == int(num)
        assert abs(p.timestamp - float(ts)) < 1e-6
        assert p.orig_len == int(flen) and len(p.data) == int(caplen)


# --------------------------------------------------------------------------------------------- classic pcap
@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("nanos", [False, True])
def test_pcap_variants(tmp_path, big_endian, nanos):
    pk = frames(50, t0=1_700_000_000.123456, step=0.000_001_5)
    f = tmp_path / "x.pcap"
    pcapgen.write_pcap(f, pk, linktype=101, nanos=nanos, big_endian=big_endian)
    r, pkts = read_all(f)
    assert r.format == "pcap" and r.truncated is None
    assert {p.linktype for p in pkts} == {101}
    check_same(pkts, pk, tol=1e-6 if not nanos else 5e-7)


def test_pcap_nanosecond_precision(tmp_path):
    f = tmp_path / "ns.pcap"
    f.write_bytes(
        struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
        + struct.pack("<IIII", 1_700_000_000, 999_999_999, 4, 4) + b"abcd"
        + struct.pack("<IIII", 1_700_000_001, 1, 4, 4) + b"efgh"
    )
    _, pkts = read_all(f)
    assert pkts[0].timestamp == pytest.approx(1_700_000_000.999_999_999, abs=3e-7)
    assert pkts[1].timestamp == pytest.approx(1_700_000_001.000_000_001, abs=3e-7)
    assert pkts[0].timestamp <= pkts[1].timestamp  # a float holds ~0.24 us at this epoch, not 2 ns


def test_pcap_microsecond_exact(tmp_path):
    f = tmp_path / "us.pcap"
    f.write_bytes(
        struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
        + struct.pack("<IIII", 1_700_000_000, 123_456, 1, 1) + b"a"
    )
    _, pkts = read_all(f)
    assert pkts[0].timestamp == 1_700_000_000.123456


def test_pcap_snaplen_cut_packets(tmp_path):
    pk = [(1.5, b"x" * 96, 1514), (2.5, b"y" * 60, 60)]
    f = tmp_path / "snap.pcap"
    pcapgen.write_pcap(f, pk, snaplen=96)
    _, pkts = read_all(f)
    check_same(pkts, pk)


@pytest.mark.parametrize("big_endian", [False, True])
def test_pcap_fcs_bits_in_linktype(tmp_path, big_endian):
    """Upper bits of the link-type field: 'FCS length present' + FCS length in 16-bit words."""
    fcs = b"\xde\xad\xbe\xef"
    frame = bytes(range(60))
    pk = [(1.0, frame + fcs), (2.0, (frame + fcs)[:30], 64), (3.0, (frame + fcs)[:62], 64)]
    f = tmp_path / "fcs.pcap"
    pcapgen.write_pcap(f, pk, linktype=1 | 0x04000000 | (2 << 28), big_endian=big_endian)
    r, pkts = read_all(f)
    assert [p.linktype for p in pkts] == [1, 1, 1]
    assert pkts[0].data == frame and pkts[0].orig_len == 60
    assert pkts[1].data == frame[:30] and pkts[1].orig_len == 60  # FCS not captured: nothing to strip
    assert pkts[2].data == frame and pkts[2].orig_len == 60  # half of the FCS captured: stripped


def test_pcap_linktype_without_fcs_bit_is_not_stripped(tmp_path):
    f = tmp_path / "nofcs.pcap"
    pcapgen.write_pcap(f, [(1.0, b"z" * 64)], linktype=1)
    _, pkts = read_all(f)
    assert pkts[0].data == b"z" * 64


def test_pcap_modified_kuznetzov_format(tmp_path):
    f = tmp_path / "mod.pcap"
    f.write_bytes(
        struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 65535, 1)
        + struct.pack("<IIII", 10, 500_000, 3, 3) + b"\0" * 8 + b"abc"
        + struct.pack("<IIII", 11, 0, 2, 2) + b"\0" * 8 + b"de"
    )
    r, pkts = read_all(f)
    assert [(p.timestamp, p.data) for p in pkts] == [(10.5, b"abc"), (11.0, b"de")]
    assert [n.id for n in r.problems] == ["capture.modified_pcap"]


def test_unsupported_linktype_is_noted_once(tmp_path):
    f = tmp_path / "wifi.pcap"
    pcapgen.write_pcap(f, frames(5), linktype=105)
    r, pkts = read_all(f)
    assert len(pkts) == 5 and pkts[0].linktype == 105
    assert [(n.id, n.params["linktype"]) for n in r.problems] == [("capture.unsupported_linktype", "105 (IEEE802_11)")]


def test_scapy_wrpcap_roundtrip(tmp_path):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    pkts_in = [Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(dst="10.0.0.%d" % i) / TCP(dport=6650) / (b"p" * i) for i in range(1, 20)]
    for i, p in enumerate(pkts_in):
        p.time = 1_700_000_000 + i / 7
    f = tmp_path / "scapy.pcap"
    wrpcap(str(f), pkts_in)
    _, pkts = read_all(f)
    check_same(pkts, [(float(p.time), bytes(p)) for p in pkts_in])


# --------------------------------------------------------------------------------------------------- pcapng
def test_pcapng_two_interfaces_tsresol_tsoffset_and_spb(tmp_path):
    ifaces = [
        {"linktype": 1, "tsresol": pcapgen.TSRESOL_NS, "snaplen": 64},
        {"linktype": 101, "tsresol": pcapgen.tsresol_pow2(20), "tsoffset": 1_000},
        {"linktype": 276},  # default resolution 10^-6
    ]
    ts0 = 1_700_000_000.25
    pk = [
        (0, ts0 + 0.000_000_123, b"e" * 60),
        (1, ts0 + 1.5, b"r" * 40),
        ("spb", None, b"s" * 64, 200),  # snaplen 64 of interface 0: caplen = min(64, 200)
        (2, ts0 + 2.000_001, b"c" * 44),
        (("pb", 1), ts0 + 3.25, b"o" * 33),  # obsolete Packet Block
        (0, ts0 + 4.0, b"t" * 64, 1500),
    ]
    f = tmp_path / "multi.pcapng"
    nrb = pcapgen.block(4, struct.pack("<HH", 0, 0))
    isb = pcapgen.block(5, struct.pack("<III", 0, 0, 0))
    pcapgen.write_pcapng(f, ifaces, pk, extra_blocks=[nrb, isb])
    r, pkts = read_all(f)
    assert r.format == "pcapng" and r.truncated is None
    assert [p.index for p in pkts] == [1, 2, 3, 4, 5, 6]
    assert [p.linktype for p in pkts] == [1, 101, 1, 276, 101, 1]
    assert [p.data for p in pkts] == [b"e" * 60, b"r" * 40, b"s" * 64, b"c" * 44, b"o" * 33, b"t" * 64]
    assert [p.orig_len for p in pkts] == [60, 40, 200, 44, 33, 1500]
    assert pkts[0].timestamp == pytest.approx(ts0 + 0.000_000_123, abs=3e-7)
    assert pkts[1].timestamp == pytest.approx(ts0 + 1.5, abs=1e-6)  # 2^-20 s resolution + offset 1000 s
    assert pkts[2].timestamp == pkts[1].timestamp  # SPB: no timestamp of its own
    assert pkts[3].timestamp == pytest.approx(ts0 + 2.000_001, abs=1e-7)
    assert pkts[4].timestamp == pytest.approx(ts0 + 3.25, abs=1e-6)
    assert "capture.simple_block_time" in [n.id for n in r.problems]
    assert "capture.block_skipped" not in [n.id for n in r.problems]  # name resolution, statistics: silent


def test_pcapng_power_of_two_resolution_exact(tmp_path):
    f = tmp_path / "p2.pcapng"
    t = (1_700_000_000 << 20) + (1 << 19)  # x.5 s in 2^-20 units
    body = struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, 2, 2) + b"hi"
    f.write_bytes(pcapgen.shb() + pcapgen.idb(1, tsresol=pcapgen.tsresol_pow2(20)) + pcapgen.block(6, body))
    _, pkts = read_all(f)
    assert pkts[0].timestamp == 1_700_000_000.5


@pytest.mark.parametrize("big_endian", [False, True])
def test_pcapng_byte_orders(tmp_path, big_endian):
    pk = frames(20)
    f = tmp_path / "o.pcapng"
    pcapgen.write_pcapng(f, [{"linktype": 1, "tsresol": 9}], [(0, t, d) for t, d in pk], big_endian=big_endian)
    r, pkts = read_all(f)
    check_same(pkts, pk, tol=5e-7)


def test_pcapng_several_sections_reset_interfaces(tmp_path):
    data = b"".join(
        [
            pcapgen.shb(),
            pcapgen.idb(1),
            pcapgen.idb(101),
            pcapgen.epb(1, 10.0, b"A"),
            pcapgen.shb(big_endian=True),  # new section, other byte order, new interface list
            pcapgen.idb(113, tsresol=3, big_endian=True),
            pcapgen.epb(0, 20.5, b"B", tsresol=3, big_endian=True),
            pcapgen.epb(1, 21.0, b"C", big_endian=True),  # interface 1 is not defined in this section
            pcapgen.shb(),
            pcapgen.idb(228),
            pcapgen.epb(0, 30.0, b"D"),
        ]
    )
    f = tmp_path / "sections.pcapng"
    f.write_bytes(data)
    r, pkts = read_all(f)
    assert [(p.index, p.linktype, p.data, p.timestamp) for p in pkts] == [
        (1, 101, b"A", 10.0),
        (2, 113, b"B", 20.5),
        (3, 228, b"D", 30.0),
    ]
    assert r.truncated is None
    assert any(n.id == "capture.undefined_interface" and "interface 1" in n.params["interface"] for n in r.problems)


def test_pcapng_unknown_and_custom_blocks_are_skipped_with_a_note(tmp_path):
    unknown = pcapgen.block(0x12345678, b"whatever")
    custom = pcapgen.block(0x00000BAD, struct.pack("<I", 32473) + b"data")
    dsb = pcapgen.block(0x0000000A, struct.pack("<II", 0x544C534B, 4) + b"keys")
    f = tmp_path / "unk.pcapng"
    pcapgen.write_pcapng(
        f, [{"linktype": 1}], [(0, 1.0, b"a"), (0, 2.0, b"b")], extra_blocks=[unknown, custom, dsb] + [unknown] * 100
    )
    r, pkts = read_all(f)
    assert [p.data for p in pkts] == [b"a", b"b"]
    assert len(r.problems) == 3  # one note per kind, not per block
    skipped = [n.params for n in r.problems if n.id == "capture.block_skipped"]
    assert {p["type"] for p in skipped} >= {0x12345678}
    assert any(p["block"] and "Custom" in p["block"] for p in skipped)
    assert any(p["block"] and "Decryption Secrets" in p["block"] for p in skipped)


def test_pcapng_fcslen_option(tmp_path):
    f = tmp_path / "fcs.pcapng"
    frame = bytes(range(60))
    pcapgen.write_pcapng(f, [{"linktype": 1, "fcslen": 4}], [(0, 1.0, frame + b"\x01\x02\x03\x04")])
    _, pkts = read_all(f)
    assert pkts[0].data == frame and pkts[0].orig_len == 60


def test_pcapng_scapy_writer_roundtrip(tmp_path):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapNgWriter

    pkts_in = [Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP() / TCP(sport=i) / (b"q" * i) for i in range(1, 30)]
    for i, p in enumerate(pkts_in):
        p.time = 1_700_000_000 + i * 0.25
    f = tmp_path / "scapy.pcapng"
    with PcapNgWriter(str(f)) as w:
        for p in pkts_in:
            w.write(p)
    r, pkts = read_all(f)
    assert r.format == "pcapng"
    check_same(pkts, [(float(p.time), bytes(p)) for p in pkts_in])


def test_pcapng_epb_caplen_larger_than_block_is_cut(tmp_path):
    body = struct.pack("<IIIII", 0, 0, 1_000_000, 100, 100) + b"abcd"
    f = tmp_path / "bad.pcapng"
    f.write_bytes(pcapgen.shb() + pcapgen.idb(1) + pcapgen.block(6, body) + pcapgen.epb(0, 2.0, b"ok"))
    r, pkts = read_all(f)
    assert [p.data for p in pkts] == [b"abcd", b"ok"]
    assert r.problems


# ------------------------------------------------------------------------------------------------------ gzip
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_gzip_is_transparent(tmp_path, fmt):
    pk = frames(300, size=200)
    f = tmp_path / f"x.{fmt}.gz"
    if fmt == "pcap":
        pcapgen.write_pcap(f, pk, gzip=True)
    else:
        pcapgen.write_pcapng(f, [{"linktype": 1}], [(0, t, d) for t, d in pk], gzip=True)
    assert f.read_bytes()[:2] == b"\x1f\x8b"
    r, pkts = read_all(f)
    assert r.format == fmt and r.compressed and r.truncated is None
    check_same(pkts, pk)


def test_corpus_gzipped_equals_plain(tmp_path):
    f = tmp_path / "c.pcapng.gz"
    f.write_bytes(gzip.compress(CORPUS["pcapng"].read_bytes()))
    _, a = read_all(f)
    _, b = read_all(CORPUS["pcapng"])
    assert [(p.timestamp, p.data) for p in a] == [(p.timestamp, p.data) for p in b]


class ReadOnly:
    """A minimal file-like object: only read(), no peek/seek/readinto."""

    def __init__(self, data: bytes):
        self._b = io.BytesIO(data)
        self.closed = False

    def read(self, n=-1):
        return self._b.read(min(n, 7) if n and n > 0 else n)  # short reads on purpose

    def close(self):
        self.closed = True


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("kind", ["bytesio", "readonly", "buffered"])
def test_file_object_sources(compress, kind):
    pk = frames(40)
    raw = pcapgen.pcap_bytes(pk)
    if compress:
        raw = gzip.compress(raw)
    src = {"bytesio": io.BytesIO, "readonly": ReadOnly, "buffered": lambda b: io.BufferedReader(io.BytesIO(b))}[
        kind
    ](raw)
    with open_capture(src) as r:
        pkts = list(r)
    assert r.compressed is compress
    check_same(pkts, pk)
    assert not src.closed  # the caller's object is the caller's to close


def _open_fds_of(path) -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += fd.readlink() == path
        except OSError:
            pass
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_path_types_and_close(tmp_path):
    f = tmp_path / "p.pcap"
    pcapgen.write_pcap(f, frames(3))
    for src in (f, str(f), bytes(f)):
        with open_capture(src) as r:
            assert next(iter(r)).index == 1
            assert _open_fds_of(f) == 1  # the core opened it ...
        assert _open_fds_of(f) == 0  # ... and closed it


def test_iteration_is_lazy_and_single_pass(tmp_path):
    f = tmp_path / "lazy.pcap"
    pcapgen.write_pcap(f, frames(10))
    with open_capture(f) as r:
        it = iter(r)
        assert next(it).index == 1
        assert r.packets == 1
        rest = list(r)
        assert [p.index for p in rest] == list(range(2, 11))
        assert list(r) == []


@pytest.mark.parametrize("fmt", ["pcap", "pcapng", "pcap.gz"])
def test_a_file_of_many_records_is_read_through(tmp_path, fmt):
    """What the reader holds meanwhile (a read and a record, not the file) is a cargo test: capture_reader.rs
    what_the_reader_holds_does_not_grow_with_the_file."""
    pk = frames(30_000, size=300)  # ~10 MB
    f = tmp_path / f"big.{fmt}"
    if fmt == "pcapng":
        pcapgen.write_pcapng(f, [{"linktype": 1}], [(0, t, d) for t, d in pk])
    else:
        pcapgen.write_pcap(f, pk, gzip=fmt.endswith(".gz"))
    del pk
    n = 0
    with open_capture(f) as r:
        for _p in r:
            n += 1
    assert n == 30_000  # 9.5 MB of records


# ------------------------------------------------------------------------------------------ truncation
def _truncation_cases(data: bytes, last_record_start: int):
    return range(last_record_start + 1, len(data))


@pytest.mark.parametrize("fmt", ["pcap", "pcapng", "pcap-be", "pcapng-be"])
def test_truncated_inside_last_record(tmp_path, fmt):
    pk = frames(8, size=50)
    be = fmt.endswith("-be")
    if fmt.startswith("pcapng"):
        data = pcapgen.pcapng_bytes([{"linktype": 1}], [(0, t, d) for t, d in pk], big_endian=be)
        last = len(data) - len(pcapgen.epb(0, pk[-1][0], pk[-1][1]))
    else:
        data = pcapgen.pcap_bytes(pk, big_endian=be)
        last = len(data) - 16 - len(pk[-1][1])
    # exactly at the record boundary: a complete, shorter file
    f = tmp_path / "t"
    f.write_bytes(data[:last])
    r, pkts = read_all(f)
    assert len(pkts) == 7 and r.truncated is None
    for cut in _truncation_cases(data, last):
        f.write_bytes(data[:cut])
        r, pkts = read_all(f)
        check_same(pkts, pk[:7])
        assert r.truncated is not None, cut
        assert r.truncated.startswith("capture file truncated: ")
        assert f"cut off at byte offset {cut}" in r.truncated
        assert f"starting at byte offset {last})" in r.truncated
        if cut - last >= 8 + 4 * (not fmt.startswith("pcapng")):  # record length readable
            assert "packet record 8" in r.truncated
            assert f"needs {len(data) - cut} more byte" in r.truncated
        else:
            hdr = 12 if fmt.startswith("pcapng") else 16
            assert f"needs {last + hdr - cut} more byte" in r.truncated


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_truncated_gzip(tmp_path, fmt):
    pk = frames(2000, size=300)
    if fmt == "pcap":
        data = pcapgen.pcap_bytes(pk)
    else:
        data = pcapgen.pcapng_bytes([{"linktype": 1}], [(0, t, d) for t, d in pk])
    gz = gzip.compress(data, compresslevel=1)
    f = tmp_path / "t.gz"
    for cut in (len(gz) // 3, len(gz) // 2, len(gz) - 9, len(gz) - 1):
        f.write_bytes(gz[:cut])
        r, pkts = read_all(f)
        if cut < len(gz) // 2 + 1:
            assert 0 < len(pkts) < 2000
        check_same(pkts, pk[: len(pkts)])
        assert r.truncated and r.truncated.startswith("capture file truncated")


def test_gzip_trailer_cut_but_data_complete(tmp_path):
    pk = frames(5)
    gz = gzip.compress(pcapgen.pcap_bytes(pk))
    f = tmp_path / "t.gz"
    f.write_bytes(gz[:-8])  # CRC + size trailer missing
    r, pkts = read_all(f)
    check_same(pkts, pk)
    assert r.truncated == (
        "capture file truncated after packet record 5: gzip stream error: "
        "EOFError: Compressed file ended before the end-of-stream marker was reached"
    )


def test_corrupt_huge_caplen_stops_with_message(tmp_path):
    pk = frames(3)
    data = pcapgen.pcap_bytes(pk) + struct.pack("<IIII", 1, 0, 0xFFFFFFF0, 0xFFFFFFF0) + b"x" * 100
    f = tmp_path / "c.pcap"
    f.write_bytes(data)
    r, pkts = read_all(f)
    assert len(pkts) == 3
    assert r.truncated.startswith("capture file corrupt:") and "packet record 4" in r.truncated


def test_corrupt_pcapng_block_length(tmp_path):
    data = pcapgen.pcapng_bytes([{"linktype": 1}], [(0, 1.0, b"a")]) + struct.pack("<II", 6, 13) + b"\0" * 20
    f = tmp_path / "c.pcapng"
    f.write_bytes(data)
    r, pkts = read_all(f)
    assert len(pkts) == 1
    assert r.truncated.startswith("capture file corrupt:")


def test_pcapng_trailing_length_mismatch(tmp_path):
    good = pcapgen.epb(0, 2.0, b"bb")
    bad = good[:-4] + struct.pack("<I", len(good) + 4)
    data = pcapgen.pcapng_bytes([{"linktype": 1}], [(0, 1.0, b"a")]) + bad + pcapgen.epb(0, 3.0, b"c")
    f = tmp_path / "m.pcapng"
    f.write_bytes(data)
    r, pkts = read_all(f)
    assert [p.data for p in pkts] == [b"a"]
    assert "trailing length" in r.truncated


# ----------------------------------------------------------------------------------------------- errors
def test_missing_file(tmp_path):
    with pytest.raises(CaptureError, match="no such file"):
        open_capture(tmp_path / "nope.pcap")


def test_directory(tmp_path):
    with pytest.raises(CaptureError, match="directory"):
        open_capture(tmp_path)


def test_empty_file(tmp_path):
    f = tmp_path / "empty.pcap"
    f.write_bytes(b"")
    with pytest.raises(CaptureError, match="empty"):
        open_capture(f)


def test_empty_gzip(tmp_path):
    f = tmp_path / "empty.pcap.gz"
    f.write_bytes(gzip.compress(b""))
    with pytest.raises(CaptureError, match="empty"):
        open_capture(f)


def test_garbage_file(tmp_path):
    f = tmp_path / "http.txt"
    f.write_bytes(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    with pytest.raises(CaptureError) as ei:
        open_capture(f)
    assert "not a pcap or pcapng file (starts with 47 45 54 20)" in str(ei.value)


def test_not_gzip_after_all(tmp_path):
    f = tmp_path / "fake.gz"
    f.write_bytes(b"\x1f\x8bthis is not deflate data at all")
    with pytest.raises(CaptureError):
        open_capture(f)


@pytest.mark.parametrize("n", [1, 3, 4, 10, 23])
def test_short_pcap_header(tmp_path, n):
    f = tmp_path / "short.pcap"
    f.write_bytes(pcapgen.pcap_bytes([])[:n])
    with pytest.raises(CaptureError, match="too short|truncated"):
        open_capture(f)


@pytest.mark.parametrize("n", [4, 11, 12, 20, 27])
def test_short_pcapng_header(tmp_path, n):
    f = tmp_path / "short.pcapng"
    f.write_bytes(pcapgen.shb()[:n])
    with pytest.raises(CaptureError):
        open_capture(f)


def test_pcapng_bad_byte_order_magic(tmp_path):
    f = tmp_path / "bom.pcapng"
    f.write_bytes(struct.pack("<III", 0x0A0D0D0A, 28, 0x11223344) + b"\0" * 16)
    with pytest.raises(CaptureError, match="byte-order"):
        open_capture(f)


def test_header_only_files_are_empty_captures(tmp_path):
    f = tmp_path / "h.pcap"
    pcapgen.write_pcap(f, [])
    r, pkts = read_all(f)
    assert pkts == [] and r.truncated is None
    g = tmp_path / "h.pcapng"
    pcapgen.write_pcapng(g, [{"linktype": 1}], [])
    r, pkts = read_all(g)
    assert pkts == [] and r.truncated is None


def test_wrong_argument_type():
    with pytest.raises(TypeError):
        open_capture(12345)


# ------------------------------------------------------------------------------------------- hypothesis
_PCAP_HDR = pcapgen.pcap_bytes([])
_PCAPNG_HDR = pcapgen.shb() + pcapgen.idb(1) + pcapgen.idb(101, tsresol=9)
_GOOD_TAIL = pcapgen.pcap_bytes(frames(3))[24:]


def _drain(data: bytes) -> None:
    try:
        r = open_capture(io.BytesIO(data))
    except CaptureError:
        return
    with r:
        for p in r:
            assert isinstance(p, CapturedPacket)
            assert isinstance(p.data, bytes)
        assert r.truncated is None or isinstance(r.truncated, str)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    head=st.sampled_from([_PCAP_HDR, _PCAPNG_HDR, pcapgen.pcap_bytes([], big_endian=True, nanos=True), b""]),
    tail=st.binary(max_size=600),
    gz=st.booleans(),
)
def test_random_bytes_after_valid_header_never_raise(head, tail, gz):
    data = head + tail
    if gz:
        data = gzip.compress(data)
    _drain(data)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_valid_files_never_raise(data):
    base = bytearray(
        data.draw(
            st.sampled_from(
                [
                    _PCAP_HDR + _GOOD_TAIL,
                    pcapgen.pcapng_bytes(
                        [{"linktype": 1, "tsresol": 0x94}, {"linktype": 113}],
                        [(0, 1.0, b"a" * 30), ("spb", None, b"s" * 20), (1, 2.0, b"b" * 9), (("pb", 0), 3.0, b"c")],
                    ),
                ]
            )
        )
    )
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(base) - 1))
        base[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(base)))
    _drain(bytes(base[:cut]))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_files_only_capture_error(blob):
    _drain(blob)


def _frames_of(path) -> int:
    from dissector.options import Options
    from dissector.run import analysed_records

    return sum(1 for r in analysed_records(path, Options()) if "index" in r)


def test_rotated_files_joined_with_cat_are_read_whole(tmp_path):
    """tcpdump -C / -G writes one pcap per rotation; users join them with cat. Each file's frames must all be
    there (the counts come from each capture read alone, which the manifests' census checks elsewhere)."""
    from pathlib import Path

    captures = Path(__file__).resolve().parent.parent / "captures"
    a, b = captures / "01_basic_nonbatched.pcap", captures / "05_cumulative_ack.pcap"
    joined = tmp_path / "joined.pcap"
    joined.write_bytes(a.read_bytes() + b.read_bytes())
    assert _frames_of(joined) == _frames_of(a) + _frames_of(b)
    with open_capture(joined) as reader:
        packets = list(reader)
        notes = [f for f in reader.problems if f.id == "capture.concatenated"]
    assert [n.params["offset"] for n in notes] == [a.stat().st_size]
    assert [p.index for p in packets] == list(range(1, len(packets) + 1))


def test_a_joined_file_may_change_byte_order_and_time_resolution(tmp_path):
    first = pcapgen.pcap_bytes([(1.5, b"\x01" * 20), (2.25, b"\x02" * 20)])
    second = pcapgen.pcap_bytes([(3.000000001, b"\x03" * 30)], nanos=True, big_endian=True, linktype=101)
    path = tmp_path / "mixed.pcap"
    path.write_bytes(first + second)
    with open_capture(path) as reader:
        packets = list(reader)
    assert [(p.index, p.linktype, len(p.data)) for p in packets] == [(1, 1, 20), (2, 1, 20), (3, 101, 30)]
    assert packets[2].timestamp == pytest.approx(3.000000001, abs=1e-9)


# ------------------------------------------------------------------------------------ hostile lengths
def _pcap_record(caplen: int, orig_len: int | None = None, body: bytes = b"") -> bytes:
    return struct.pack("<IIII", 1, 0, caplen, caplen if orig_len is None else orig_len) + body


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize(
    "tail,message",
    [
        # a record claiming 60 MB (below the 64 MiB limit) in a small file: cut, and nothing allocated for it
        (_pcap_record(60_000_000, body=b"x" * 100), "capture file truncated: packet record 4 (starting at byte offset"),
        (_pcap_record(0x80000000, body=b"x" * 100), "capture file corrupt: packet record 4 at byte offset"),  # 2 GB
        (_pcap_record(0xFFFFFFFF, body=b"x" * 100), "capture file corrupt: packet record 4 at byte offset"),
    ],
)
def test_hostile_pcap_lengths_allocate_nothing(tmp_path, tail, message, gz):
    f = tmp_path / "hostile.pcap"
    pcapgen.write_raw(f, pcapgen.pcap_bytes(frames(3)) + tail, gzip=gz)
    r, pkts = read_all(f)
    assert len(pkts) == 3
    assert r.truncated.startswith(message), r.truncated


@pytest.mark.parametrize(
    "block,message",
    [
        (struct.pack("<II", 6, 60_000_000) + b"\0" * 200, "capture file truncated: packet record 2 (Enhanced Packet Block)"),
        (struct.pack("<II", 6, 0xFFFFFFFC) + b"\0" * 200, "has invalid length 4294967292"),
        (struct.pack("<II", 6, 0) + b"\0" * 200, "has invalid length 0"),
        (struct.pack("<II", 0x12345678, 0) + b"\0" * 200, "(type 0x12345678) has invalid length 0"),
        (struct.pack("<II", 6, 12) + struct.pack("<I", 12), None),  # an empty EPB: too short, skipped
    ],
)
def test_hostile_pcapng_lengths(tmp_path, block, message):
    f = tmp_path / "hostile.pcapng"
    f.write_bytes(pcapgen.pcapng_bytes([{"linktype": 1}], [(0, 1.0, b"a")]) + block + pcapgen.epb(0, 2.0, b"b"))
    r, pkts = read_all(f)
    if message is None:
        assert [p.data for p in pkts] == [b"a", b"b"] and r.truncated is None
        assert [(n.id, n.params) for n in r.problems] == [("capture.short_block", {"block": "Enhanced Packet Block"})]
    else:
        assert [p.data for p in pkts] == [b"a"]
        assert message in r.truncated, r.truncated


def test_a_record_larger_than_a_read_is_read_whole(tmp_path):
    big = bytes(range(256)) * (3 * 4096 + 7)  # 3 MiB and more: several reads
    pk = [(1.0, b"a" * 60), (2.0, big), (3.0, b"c" * 60)]
    for gz in (False, True):
        f = tmp_path / f"big{gz}.pcap"
        pcapgen.write_pcap(f, pk, gzip=gz)
        r, pkts = read_all(f)
        check_same(pkts, pk)


# ------------------------------------------------------------------------------------ read errors
class FailingStream(io.RawIOBase):
    """A stream whose reads fail after ``good`` bytes, with ``error``."""

    def __init__(self, data: bytes, good: int, error: BaseException):
        self._data, self._good, self._error, self._pos = data, good, error, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._pos >= self._good:
            raise self._error
        n = min(len(b), self._good - self._pos)
        b[:n] = self._data[self._pos:self._pos + n]
        self._pos += n
        return n


def test_an_io_error_mid_file_ends_the_capture_with_its_text():
    data = pcapgen.pcap_bytes(frames(5, size=50))
    good = 24 + 2 * (16 + 50)  # two whole records
    r, pkts = read_all(FailingStream(data, good, OSError(5, "Input/output error")))
    assert len(pkts) == 2
    assert r.truncated == ("capture file truncated after packet record 2: read error: "
                           "OSError: [Errno 5] Input/output error")
    r, pkts = read_all(FailingStream(data, good + 14, OSError(5, "Input/output error")))
    assert len(pkts) == 2
    assert r.truncated == ("capture file truncated: packet record 3 (starting at byte offset 156) cut off at byte "
                           "offset 170 (needs 52 more bytes); read error: OSError: [Errno 5] Input/output error")
    r, pkts = read_all(FailingStream(data, good + 10, OSError(5, "Input/output error")))
    assert r.truncated.startswith("capture file truncated: packet record 3 header (starting at byte offset 156) "
                                  "cut off at byte offset 166 (needs 6 more bytes)")


def test_another_exception_of_the_stream_propagates():
    data = pcapgen.pcap_bytes(frames(5, size=50))
    with open_capture(FailingStream(data, 24 + 2 * (16 + 50), KeyError("boom"))) as r:
        it = iter(r)
        assert [next(it).index, next(it).index] == [1, 2]
        with pytest.raises(KeyError, match="boom"):
            next(it)
        assert list(r) == []


# ------------------------------------------------------------------------------------ gzip as Python reads it
def _python_gzip(data: bytes) -> tuple[bytes, str | None]:
    """What Python's gzip module gives of ``data`` read in 1 MiB read1 calls: the bytes before the error, and
    the error as the reader words it (``Type: message``)."""
    out = []
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as g:
        while True:
            try:
                chunk = g.read1(1 << 20)
            except (EOFError, OSError, zlib.error) as exc:
                return b"".join(out), f"{type(exc).__name__}: {exc}"
            if not chunk:
                return b"".join(out), None
            out.append(chunk)


def _gzip_member(data: bytes, flags: int = 0, extra: bytes = b"", zdict: bytes | None = None) -> bytes:
    raw = zlib.compressobj(6, zlib.DEFLATED, -15, **({"zdict": zdict} if zdict else {}))
    body = raw.compress(data) + raw.flush()
    header = b"\x1f\x8b\x08" + bytes([flags]) + b"\0\0\0\0\0\xff" + extra
    return header + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


_GZ_PCAP = pcapgen.pcap_bytes(frames(400, size=120))
_GZ_HALF = len(_GZ_PCAP) // 2


def _gzip_cases():
    whole = gzip.compress(_GZ_PCAP)
    two = gzip.compress(_GZ_PCAP[:_GZ_HALF]) + gzip.compress(_GZ_PCAP[_GZ_HALF:])
    crc_bad = bytearray(whole)
    crc_bad[-8] ^= 0xFF
    size_bad = bytearray(whole)
    size_bad[-4] ^= 0x01
    deflate_bad = bytearray(whole)
    deflate_bad[len(whole) // 2] ^= 0x55  # garbage out, then a record header that cannot be right
    named = _gzip_member(_GZ_PCAP[:_GZ_HALF], flags=8 | 16 | 2 | 4,
                         extra=b"\x02\x00ab" + b"name\0" + b"comment\0" + b"\x00\x00") + _gzip_member(_GZ_PCAP[_GZ_HALF:])
    return {
        "one member": whole,
        "two members": two,
        "zero padding": two + b"\0" * 100,
        "trailing garbage": whole + b"xy",
        "trailing byte": whole + b"\x1f",
        "second header cut": whole + b"\x1f\x8b\x08",
        "bad method": whole + b"\x1f\x8b\x07\0\0\0\0\0\0\xff",
        "crc": bytes(crc_bad),
        "size": bytes(size_bad),
        "trailer cut": whole[:-3],
        "deflate cut": whole[: len(whole) * 2 // 3],
        "deflate corrupt": bytes(deflate_bad),
        "invalid block type": whole + b"\x1f\x8b\x08\0\0\0\0\0\0\xff" + b"\x07" + b"\0" * 20,
        # deflate data made with a preset dictionary: its first matches reach before the start of the data, an
        # error found in zlib-rs's fast loop (which names it only on a second, slow pass)
        "distance too far back": whole + _gzip_member(_GZ_PCAP[:5000], zdict=_GZ_PCAP[:5000]),
        "header fields": named,
    }


@pytest.mark.parametrize("case", list(_gzip_cases()))
def test_gzip_reads_and_fails_as_python_gzip(tmp_path, case):
    data = _gzip_cases()[case]
    prefix, error = _python_gzip(data)
    f = tmp_path / "x.pcap.gz"
    f.write_bytes(data)
    r, pkts = read_all(f)
    g = tmp_path / "prefix.pcap"
    g.write_bytes(prefix)
    r_prefix, expected = read_all(g)
    assert [(p.index, p.timestamp, p.data) for p in pkts] == [(p.index, p.timestamp, p.data) for p in expected]
    if error is None:
        assert r.truncated is None and len(pkts) == 400
    elif r_prefix.truncated and r_prefix.truncated.startswith("capture file corrupt"):
        assert r.truncated == r_prefix.truncated  # the records went wrong before the stream did
    else:
        assert r.truncated.endswith(f"gzip stream error: {error}"), (r.truncated, error)


def _python_pcapng_time(t: int, units: int, offset: int = 0) -> float:
    """Epoch seconds of a pcapng timestamp as Python's integers give them (one rounding)."""
    if t < 1 << 53:
        return t / units + offset
    sec, frac = divmod(t, units)
    return sec + frac / units + offset


@pytest.mark.parametrize("tsresol", [0, 3, 6, 9, 15, 16, 19, 22, 23, 30, 127, 0x80 | 20, 0x80 | 63, 0x80 | 127])
def test_pcapng_times_of_every_resolution_as_python_computes_them(tmp_path, tsresol):
    units = 2 ** (tsresol & 0x7F) if tsresol & 0x80 else 10 ** tsresol
    stamps = [0, 1, 123_456_789, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, 1_700_000_000_123_456_789, (1 << 64) - 1]
    for offset in (0, -5, 1_000_000_007):
        body = b"".join(pcapgen.block(6, struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, 1, 1) + b"x") for t in stamps)
        f = tmp_path / "t.pcapng"
        f.write_bytes(pcapgen.shb() + pcapgen.idb(1, tsresol=tsresol, tsoffset=offset) + body)
        _, pkts = read_all(f)
        assert [p.timestamp for p in pkts] == [_python_pcapng_time(t, units, offset) for t in stamps]


def test_every_note_the_core_makes_is_registered_here():
    """The reader's notes are made in the core and worded in files.py: the ids must be the same set. The core
    declares them in one enum (CaptureProblem, crates/engine/src/problems.rs), the only ids its notes can take."""
    import re

    from dissector import problems

    source = (Path(__file__).resolve().parent.parent / "crates" / "engine" / "src" / "problems.rs").read_text()
    made = set(re.findall(r'=> "(capture\.[a-z_]+)"', source))
    assert len(made) >= 10  # the scan found the enum
    registered = {pid for pid in problems.REGISTRY if pid.startswith("capture.")}
    assert made == registered
