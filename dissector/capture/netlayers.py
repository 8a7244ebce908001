"""Stage 2: link layer -> IPv4/IPv6 -> TCP, one captured packet at a time.

``tcp_segment(pkt)`` returns a :class:`TcpSegment` for a TCP packet and ``None`` for anything else (non-IP,
non-TCP, IP fragments, malformed or truncated headers).  It never raises on bad packet bytes.

Written as one straight-line function with precompiled ``struct.Struct`` objects: it runs for every packet.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from socket import AF_INET6, inet_ntoa, inet_ntop
from typing import Iterable, Iterator

from .files import CapturedPacket

__all__ = [
    "TcpSegment",
    "tcp_segment",
    "iter_tcp_segments",
    "FIN",
    "SYN",
    "RST",
    "PSH",
    "ACK",
    "URG",
    "ECE",
    "CWR",
    "NS",
    "flags_str",
]

# TCP flags (``TcpSegment.flags``; the low 8 bits of the flags byte plus NS as bit 8)
FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10
URG = 0x20
ECE = 0x40
CWR = 0x80
NS = 0x100

_FLAG_NAMES = ((FIN, "F"), (SYN, "S"), (RST, "R"), (PSH, "P"), (ACK, "A"), (URG, "U"), (ECE, "E"), (CWR, "C"))


def flags_str(flags: int) -> str:
    """Compact flag text like ``"SA"`` / ``"PA"`` / ``"FA"`` (tcpdump letters; ``.`` for none)."""
    return "".join(c for bit, c in _FLAG_NAMES if flags & bit) or "."


@dataclass(slots=True)
class TcpSegment:
    packet_index: int
    timestamp: float
    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int
    seq: int
    ack: int
    flags: int
    window: int
    payload: bytes  # TCP payload bytes that were captured
    missing_tail: int  # payload bytes on the wire but not captured (snaplen cut); 0 normally


# precompiled parsers
_u16 = struct.Struct("!H").unpack_from
_u32_le = struct.Struct("<I").unpack_from
_u32_be = struct.Struct("!I").unpack_from
# IPv4: ver_ihl, tos, total_len, id, frag, ttl, proto, checksum, src, dst
_ip4 = struct.Struct("!BBHHHBBHII").unpack_from
# IPv4 without options followed by TCP (the common case, one call)
_ip4tcp = struct.Struct("!BBHHHBBHIIHHIIBBH").unpack_from
# IPv6 from offset 4: payload_len, next_header, (hop limit), src, dst
_ip6 = struct.Struct("!HBx16s16s").unpack_from
# TCP: sport, dport, seq, ack, offset byte, flags byte, window
_tcp = struct.Struct("!HHIIBBH").unpack_from

# Address text caches (bounded: cleared when they get big, so memory does not grow with the capture)
_CACHE_MAX = 8192
_names4: dict[int, str] = {}
_names6: dict[bytes, str] = {}


def _name4(addr: int) -> str:
    if len(_names4) >= _CACHE_MAX:
        _names4.clear()
    name = _names4[addr] = inet_ntoa(addr.to_bytes(4, "big"))
    return name


def _name6(addr: bytes) -> str:
    if len(_names6) >= _CACHE_MAX:
        _names6.clear()
    name = _names6[addr] = inet_ntop(AF_INET6, addr)
    return name

_ETH_IPV4 = 0x0800
_ETH_IPV6 = 0x86DD
_VLAN_TYPES = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})
_IP_VERSION = {_ETH_IPV4: 4, _ETH_IPV6: 6}
_AF_INET6_VALUES = frozenset({24, 28, 30})  # NetBSD/OpenBSD/BSD/OS, FreeBSD, Darwin
_IP6_SKIP_EXT = frozenset({0, 43, 60})  # hop-by-hop, routing, destination options: (len+1)*8 bytes


def _skip_vlans(data: bytes, etype: int, off: int, dlen: int) -> tuple[int, int] | None:
    """(ethertype, offset) after any 802.1Q/802.1ad tags; None when a tag is cut short."""
    while etype in _VLAN_TYPES:
        if dlen < off + 4:
            return None
        etype = (data[off + 2] << 8) | data[off + 3]
        off += 4
    return etype, off


def tcp_segment(pkt: CapturedPacket) -> TcpSegment | None:
    """Decode link/IP/TCP headers of one captured packet; ``None`` if it is not a decodable TCP segment."""
    data = pkt.data
    lt = pkt.linktype
    dlen = len(data)

    # ------------------------------------------------------------------ link layer -> (ethertype, offset)
    if lt == 1:  # Ethernet
        if dlen < 14:
            return None
        found = _skip_vlans(data, (data[12] << 8) | data[13], 14, dlen)
        if found is None:
            return None
        etype, off = found
        if etype < 0x0600 and data[off : off + 6] == b"\xaa\xaa\x03\x00\x00\x00":  # 802.3 + LLC/SNAP
            if dlen < off + 8:
                return None
            etype = (data[off + 6] << 8) | data[off + 7]
            off += 8
        version = _IP_VERSION.get(etype)
        if version is None:
            return None
    elif lt == 276 or lt == 113:  # Linux cooked v2 / v1: the protocol field is an ethertype
        # v2: protocol(2) reserved(2) ifindex(4) hatype(2) pkttype(1) halen(1) addr(8)
        # v1: pkttype(2) hatype(2) halen(2) addr(8) protocol(2)
        head, type_at = (20, 0) if lt == 276 else (16, 14)
        if dlen < head:
            return None
        found = _skip_vlans(data, (data[type_at] << 8) | data[type_at + 1], head, dlen)
        if found is None:
            return None
        version = _IP_VERSION.get(found[0])
        if version is None:
            return None
        off = found[1]
    elif lt == 0 or lt == 108:  # BSD loopback (host order) / OpenBSD loop (network order)
        if dlen < 4:
            return None
        if lt == 108:
            (family,) = _u32_be(data, 0)
        else:
            (family,) = _u32_le(data, 0)
            if family > 0xFFFF:  # written by a big-endian machine
                (family,) = _u32_be(data, 0)
        off = 4
        if family == 2:
            version = 4
        elif family in _AF_INET6_VALUES:
            version = 6
        else:
            return None
    elif lt == 101 or lt == 12 or lt == 14:  # raw IP: version nibble
        if dlen < 1:
            return None
        version = data[0] >> 4
        off = 0
    elif lt == 228:
        version = 4
        off = 0
    elif lt == 229:
        version = 6
        off = 0
    else:
        return None

    # ------------------------------------------------------------------ network layer
    if version == 4:
        if dlen < off + 20:
            return None
        if data[off] == 0x45 and dlen >= off + 40:
            # common case, no IP options: IP and TCP headers in one unpack
            (_v, _tos, total_len, _id, frag, _ttl, proto, _ck, src, dst,
             sport, dport, seq, ack, doff, flags, window) = _ip4tcp(data, off)
            if proto != 6 or frag & 0x3FFF:  # not TCP / fragment (MF set or offset != 0)
                return None
            tcp_off = off + 20
            if total_len == 0:  # TSO/GSO capture: length not filled in; take the frame's length
                total_len = pkt.orig_len - off
        else:
            ver_ihl, _tos, total_len, _id, frag, _ttl, proto, _ck, src, dst = _ip4(data, off)
            if ver_ihl >> 4 != 4 or proto != 6 or frag & 0x3FFF:
                return None
            ihl = (ver_ihl & 0x0F) << 2
            if ihl < 20:
                return None
            tcp_off = off + ihl
            if dlen < tcp_off + 20:
                return None
            sport, dport, seq, ack, doff, flags, window = _tcp(data, tcp_off)
            if total_len == 0:
                total_len = pkt.orig_len - off
        ip_end = off + total_len  # end of the IP packet (on the wire)
        src_ip = _names4.get(src)
        if src_ip is None:
            src_ip = _name4(src)
        dst_ip = _names4.get(dst)
        if dst_ip is None:
            dst_ip = _name4(dst)
    elif version == 6:
        if dlen < off + 40:
            return None
        if data[off] >> 4 != 6:
            return None
        payload_len, nxt, src, dst = _ip6(data, off + 4)
        tcp_off = off + 40
        if payload_len == 0:  # jumbogram / TSO: use the frame's length
            payload_len = pkt.orig_len - tcp_off
        ip_end = tcp_off + payload_len
        while nxt != 6:
            if nxt in _IP6_SKIP_EXT:
                if dlen < tcp_off + 8:
                    return None
                nxt = data[tcp_off]
                tcp_off += (data[tcp_off + 1] + 1) << 3
            elif nxt == 44:  # fragment header: only an atomic fragment (offset 0, M=0) is whole
                if dlen < tcp_off + 8:
                    return None
                if _u16(data, tcp_off + 2)[0] & 0xFFF9:
                    return None
                nxt = data[tcp_off]
                tcp_off += 8
            elif nxt == 51:  # authentication header
                if dlen < tcp_off + 8:
                    return None
                nxt = data[tcp_off]
                tcp_off += (data[tcp_off + 1] + 2) << 2
            else:  # 59 no next header, ESP, ICMPv6, UDP, ...
                return None
            if tcp_off > ip_end:
                return None
        if dlen < tcp_off + 20:
            return None
        sport, dport, seq, ack, doff, flags, window = _tcp(data, tcp_off)
        src_ip = _names6.get(src)
        if src_ip is None:
            src_ip = _name6(src)
        dst_ip = _names6.get(dst)
        if dst_ip is None:
            dst_ip = _name6(dst)
    else:
        return None

    # ------------------------------------------------------------------ TCP
    thl = (doff >> 4) << 2
    if thl < 20:
        return None
    start = tcp_off + thl
    if start > ip_end or start > dlen:
        return None
    if doff & 1:
        flags |= NS
    if ip_end <= dlen:
        payload = data[start:ip_end]  # also cuts Ethernet padding / trailers (FCS)
        missing = 0
    else:
        payload = data[start:]
        # bytes of this IP packet that were on the wire but not captured (never more than the frame had)
        wire_end = ip_end if ip_end <= pkt.orig_len else pkt.orig_len
        missing = wire_end - dlen
        if missing < 0:
            missing = 0
    return TcpSegment(
        pkt.index, pkt.timestamp, src_ip, sport, dst_ip, dport, seq, ack, flags, window, payload, missing
    )


def iter_tcp_segments(reader: Iterable[CapturedPacket]) -> Iterator[TcpSegment]:
    """All TCP segments of a packet source (e.g. a :class:`~dissector.capture.CaptureReader`), in order."""
    seg = tcp_segment
    for pkt in reader:
        s = seg(pkt)
        if s is not None:
            yield s
