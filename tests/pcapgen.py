"""Tiny writers for synthetic capture files used by the tests (no dependencies).

    write_pcap(path, [(ts, frame_bytes), ...], linktype=1, nanos=False, big_endian=False)
    write_pcapng(path, [{"linktype": 1}, {"linktype": 101, "tsresol": 9}],
                 [(0, ts, frame_bytes), (1, ts, frame_bytes), ("spb", None, frame_bytes)])

Packets may carry a third (pcap) / fourth (pcapng) element, the original length on the wire, to simulate a
snaplen cut: ``(ts, data[:96], len(data))``.  ``path`` may also be a binary file object.

The block builders (``shb``, ``idb``, ``epb``, ``spb``, ``pb``, ``block``) return bytes, for tests that need
odd block sequences (several sections, unknown blocks, ...): ``write_raw(path, b"".join([...]))``.
Frame builders ``ipv4_tcp`` / ``ipv6_tcp`` / ``ether`` make simple TCP packets without scapy.
``read_pcap_header``, ``iter_pcap_records``, ``count_pcap_packets`` and ``copy_pcap`` stream classic pcap
files (the benchmarks use them to count, cut and filter large captures).
"""

from __future__ import annotations

import gzip as _gzip
import struct
from fractions import Fraction

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

TSRESOL_US = 6  # 10^-6 (pcapng default)
TSRESOL_NS = 9  # 10^-9


def tsresol_pow2(n: int) -> int:
    """if_tsresol option value for a resolution of 2^-n seconds."""
    return 0x80 | n


def _units(tsresol: int) -> int:
    return 2 ** (tsresol & 0x7F) if tsresol & 0x80 else 10**tsresol


def _split_ts(ts: float, units: int) -> tuple[int, int]:
    """(seconds, fraction in units), rounded to the nearest unit."""
    total = round(Fraction(ts) * units)
    return divmod(total, units)


def _open_out(path, gzip: bool):
    if hasattr(path, "write"):
        return path, False
    if gzip:
        return _gzip.open(path, "wb"), True
    return open(path, "wb"), True


def write_raw(path, data: bytes, gzip: bool = False) -> None:
    f, own = _open_out(path, gzip)
    try:
        f.write(data)
    finally:
        if own:
            f.close()


# ------------------------------------------------------------------------------------------ classic pcap
def pcap_bytes(
    packets,
    linktype: int = 1,
    nanos: bool = False,
    big_endian: bool = False,
    snaplen: int = 262144,
) -> bytes:
    """Bytes of a classic pcap file. ``linktype`` is the raw 32-bit field (FCS bits may be or-ed in)."""
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    units = 1_000_000_000 if nanos else 1_000_000
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    rec = struct.Struct(e + "IIII")
    for p in packets:
        ts, data = p[0], p[1]
        orig_len = p[2] if len(p) > 2 else len(data)
        sec, frac = _split_ts(ts, units)
        out.append(rec.pack(sec, frac, len(data), orig_len))
        out.append(bytes(data))
    return b"".join(out)


def write_pcap(
    path,
    packets,
    linktype: int = 1,
    nanos: bool = False,
    big_endian: bool = False,
    snaplen: int = 262144,
    gzip: bool = False,
) -> None:
    """Write ``packets`` (list of (timestamp, bytes) or (timestamp, bytes, orig_len)) as classic pcap."""
    write_raw(path, pcap_bytes(packets, linktype, nanos, big_endian, snaplen), gzip=gzip)


# Streaming read and copy of classic pcap (the benchmarks use these on captures of hundreds of MB).
PCAP_ENDIAN = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<",   # us / ns timestamps, little endian
               b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}   # the same, big endian


def read_pcap_header(f) -> tuple[bytes, str, int]:
    """(the 24 header bytes, struct byte order, link type) of an open classic pcap; ValueError otherwise."""
    hdr = f.read(24)
    endian = PCAP_ENDIAN.get(hdr[:4])
    if endian is None or len(hdr) < 24:
        raise ValueError("not a classic pcap")
    return hdr, endian, struct.unpack(endian + "I", hdr[20:])[0] & 0x0FFFFFFF


def iter_pcap_records(f, endian: str, with_data: bool = True):
    """(16-byte record header, packet bytes or None) for each record after the header; stops at a short read."""
    rec = struct.Struct(endian + "IIII")
    while True:
        h = f.read(16)
        if len(h) < 16:
            return
        incl = rec.unpack(h)[2]
        if with_data:
            yield h, f.read(incl)
        else:
            f.seek(incl, 1)
            yield h, None


def count_pcap_packets(path) -> int:
    """Number of records in a classic pcap (ValueError if it is not one)."""
    with open(path, "rb") as f:
        _, endian, _ = read_pcap_header(f)
        return sum(1 for _ in iter_pcap_records(f, endian, with_data=False))


def copy_pcap(src, dst, keep=None, max_packets=None, max_bytes=None) -> int:
    """Copy classic pcap ``src`` to ``dst`` (same header), keeping the packets for which ``keep(linktype, data)``
    is true, up to ``max_packets`` packets / ``max_bytes`` bytes written. Returns the packets written."""
    with open(src, "rb") as f:
        hdr, endian, linktype = read_pcap_header(f)  # raises before dst is created
        with open(dst, "wb") as o:
            o.write(hdr)
            written, n = len(hdr), 0
            for h, data in iter_pcap_records(f, endian):
                if (max_packets is not None and n >= max_packets) or (max_bytes is not None and written >= max_bytes):
                    break
                if keep is None or keep(linktype, data):
                    o.write(h + data)
                    written += 16 + len(data)
                    n += 1
    return n


# ----------------------------------------------------------------------------------------------- pcapng
def _options(opts, e: str) -> bytes:
    if not opts:
        return b""
    out = []
    for code, value in opts:
        out.append(struct.pack(e + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4))
    out.append(struct.pack(e + "HH", 0, 0))
    return b"".join(out)


def block(btype: int, body: bytes, big_endian: bool = False) -> bytes:
    """A pcapng block: type, total length, body (padded to 4), total length."""
    e = ">" if big_endian else "<"
    body = body + b"\0" * (-len(body) % 4)
    total = 12 + len(body)
    return struct.pack(e + "II", btype, total) + body + struct.pack(e + "I", total)


def shb(big_endian: bool = False, options=()) -> bytes:
    e = ">" if big_endian else "<"
    body = struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1) + _options(options, e)
    return block(0x0A0D0D0A, body, big_endian)


def idb(
    linktype: int = 1,
    snaplen: int = 0,
    tsresol: int | None = None,
    tsoffset: int | None = None,
    fcslen: int | None = None,
    big_endian: bool = False,
    name: str | None = None,
) -> bytes:
    e = ">" if big_endian else "<"
    opts = []
    if name is not None:
        opts.append((2, name.encode()))
    if tsresol is not None:
        opts.append((9, bytes([tsresol])))
    if fcslen is not None:
        opts.append((13, bytes([fcslen])))
    if tsoffset is not None:
        opts.append((14, struct.pack(e + "q", tsoffset)))
    body = struct.pack(e + "HHI", linktype, 0, snaplen) + _options(opts, e)
    return block(1, body, big_endian)


def _ts_units(ts: float, tsresol: int, tsoffset: int) -> int:
    units = _units(tsresol)
    sec, frac = _split_ts(ts - tsoffset, units)
    return sec * units + frac


def epb(
    iface: int,
    ts: float,
    data: bytes,
    orig_len: int | None = None,
    tsresol: int = TSRESOL_US,
    tsoffset: int = 0,
    big_endian: bool = False,
) -> bytes:
    e = ">" if big_endian else "<"
    t = _ts_units(ts, tsresol, tsoffset)
    body = struct.pack(
        e + "IIIII", iface, t >> 32, t & 0xFFFFFFFF, len(data), len(data) if orig_len is None else orig_len
    )
    return block(6, body + bytes(data), big_endian)


def spb(data: bytes, orig_len: int | None = None, big_endian: bool = False) -> bytes:
    e = ">" if big_endian else "<"
    return block(3, struct.pack(e + "I", len(data) if orig_len is None else orig_len) + bytes(data), big_endian)


def pb(
    iface: int,
    ts: float,
    data: bytes,
    orig_len: int | None = None,
    tsresol: int = TSRESOL_US,
    tsoffset: int = 0,
    big_endian: bool = False,
) -> bytes:
    """Obsolete Packet Block (type 2)."""
    e = ">" if big_endian else "<"
    t = _ts_units(ts, tsresol, tsoffset)
    body = struct.pack(
        e + "HHIIII", iface, 0, t >> 32, t & 0xFFFFFFFF, len(data), len(data) if orig_len is None else orig_len
    )
    return block(2, body + bytes(data), big_endian)


def pcapng_bytes(interfaces, packets, big_endian: bool = False, extra_blocks=()) -> bytes:
    """Bytes of a one-section pcapng file.

    ``interfaces``: list of dicts with keys ``linktype`` (default 1), ``snaplen`` (0), ``tsresol`` (option
    byte value, e.g. 9 for 10^-9 or ``tsresol_pow2(20)``; default: option absent = 10^-6), ``tsoffset``
    (seconds), ``fcslen`` (bytes).
    ``packets``: list of ``(iface, ts, data)`` or ``(iface, ts, data, orig_len)``; iface ``"spb"`` writes a
    Simple Packet Block (interface 0, ts ignored), ``("pb", n)`` an obsolete Packet Block on interface n.
    ``extra_blocks``: raw blocks inserted right after the interface descriptions.
    """
    out = [shb(big_endian)]
    for itf in interfaces:
        out.append(
            idb(
                itf.get("linktype", 1),
                itf.get("snaplen", 0),
                itf.get("tsresol"),
                itf.get("tsoffset"),
                itf.get("fcslen"),
                big_endian,
            )
        )
    out.extend(extra_blocks)
    for p in packets:
        iface, ts, data = p[0], p[1], p[2]
        orig_len = p[3] if len(p) > 3 else None
        if iface == "spb":
            out.append(spb(data, orig_len, big_endian))
            continue
        kind = "epb"
        if isinstance(iface, tuple):
            kind, iface = iface
        itf = interfaces[iface]
        tsresol = itf.get("tsresol")
        args = (iface, ts, data, orig_len, TSRESOL_US if tsresol is None else tsresol, itf.get("tsoffset") or 0)
        out.append(epb(*args, big_endian=big_endian) if kind == "epb" else pb(*args, big_endian=big_endian))
    return b"".join(out)


def write_pcapng(path, interfaces, packets, big_endian: bool = False, extra_blocks=(), gzip: bool = False) -> None:
    """Write a one-section pcapng file; see :func:`pcapng_bytes`."""
    write_raw(path, pcapng_bytes(interfaces, packets, big_endian, extra_blocks), gzip=gzip)


# ------------------------------------------------------------------------------------ simple frame builders
def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tcp_header(sport: int, dport: int, seq: int, ack: int, flags: int, window: int = 65535, options: bytes = b"") -> bytes:
    options = options + b"\0" * (-len(options) % 4)
    doff = (20 + len(options)) // 4
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, window, 0, 0) + options


def ipv4_tcp(
    src: str,
    dst: str,
    sport: int,
    dport: int,
    seq: int = 0,
    ack: int = 0,
    flags: int = 0x18,
    payload: bytes = b"",
    window: int = 65535,
    tcp_options: bytes = b"",
    ip_options: bytes = b"",
    frag: int = 0x4000,
    proto: int = 6,
) -> bytes:
    import socket

    ip_options = ip_options + b"\0" * (-len(ip_options) % 4)
    tcp = tcp_header(sport, dport, seq, ack, flags, window, tcp_options) + payload
    ihl = 5 + len(ip_options) // 4
    hdr = struct.pack(
        "!BBHHHBBH4s4s",
        0x40 | ihl,
        0,
        ihl * 4 + len(tcp),
        1,
        frag,
        64,
        proto,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    ) + ip_options
    hdr = hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:]
    return hdr + tcp


def ipv6_tcp(
    src: str,
    dst: str,
    sport: int,
    dport: int,
    seq: int = 0,
    ack: int = 0,
    flags: int = 0x18,
    payload: bytes = b"",
    window: int = 65535,
    ext_headers: list[tuple[int, bytes]] = (),
) -> bytes:
    """IPv6 + TCP. ``ext_headers``: list of (header type, header bytes incl. its next-header byte placeholder);
    the next-header fields are filled in here."""
    import socket

    tcp = tcp_header(sport, dport, seq, ack, flags, window) + payload
    chain = b""
    types = [t for t, _ in ext_headers] + [6]
    for i, (_t, body) in enumerate(ext_headers):
        chain += bytes([types[i + 1]]) + body[1:]
    first = types[0]
    hdr = struct.pack("!IHBB16s16s", 0x60000000, len(chain) + len(tcp), first, 64,
                      socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst))
    return hdr + chain + tcp


def ether(payload: bytes, ethertype: int = 0x0800, vlans=(), src: bytes = b"\x02" * 6, dst: bytes = b"\x04" * 6) -> bytes:
    """Ethernet II frame; ``vlans`` is a list of (tpid, vid) tags, outermost first."""
    hdr = dst + src
    for tpid, vid in vlans:
        hdr += struct.pack("!HH", tpid, vid)
    return hdr + struct.pack("!H", ethertype) + payload


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("struct", "Fraction", "annotations")]
