"""What a timeline line says of what the wire does not tell: an encrypted batch's bytes are unknown (its
entries cannot be read), not zero; no cipher named is no cipher shown (issue: small untruths on screen)."""

from __future__ import annotations

import subprocess
import sys

import framebuild as fb

CLI = [sys.executable, "-m", "dissector.cli.main"]


def send_line(tmp_path, md) -> str:
    path = tmp_path / "encrypted.pcap"
    fb.tcp_pcap(path, [
        ("c", fb.simple_frame("CONNECT", client_version="test", protocol_version=20)),
        ("b", fb.simple_frame("CONNECTED", server_version="test", protocol_version=20)),
        ("c", fb.simple_frame("PRODUCER", topic="t", producer_id=1, request_id=1, producer_name="p")),
        ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p")),
        ("c", fb.send_frame(b"\x8f\x11 ciphertext \x00\xff", md=md)),
    ])
    res = subprocess.run(CLI + [str(path), "--plain"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    (line,) = [line for line in res.stdout.splitlines() if " SEND             prod=" in line]
    return line


def test_an_encrypted_batch_has_unknown_bytes_and_its_cipher_only_when_named(tmp_path):
    keys = [{"key": "k1", "value": b"\x01\x02"}]
    line = send_line(tmp_path, fb.metadata(encryption_keys=keys, num_messages_in_batch=4))
    assert " msgs=4 bytes=? " in line + " ", line
    assert "algo=" not in line, line
    line = send_line(tmp_path, fb.metadata(encryption_keys=keys, encryption_algo="RSA", num_messages_in_batch=4))
    assert "algo=RSA" in line, line


def test_a_plain_batch_still_counts_its_bytes(tmp_path):
    payload = fb.batch_payload([b"hello", b"abc"])
    path = tmp_path / "plain.pcap"
    fb.tcp_pcap(path, [("c", fb.simple_frame("CONNECT", client_version="test", protocol_version=20)),
                       ("c", fb.send_frame(payload, md=fb.metadata(num_messages_in_batch=2)))])
    res = subprocess.run(CLI + [str(path), "--plain"], capture_output=True, text=True, timeout=60)
    (line,) = [line for line in res.stdout.splitlines() if " SEND             prod=" in line]
    assert " msgs=2 bytes=8 " in line + " ", line
