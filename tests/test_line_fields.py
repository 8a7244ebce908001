"""What a timeline line says without -V: the field that matters for each command, in one style of keys.

Expectations come from the manifests (what the client API was asked to do and reported), or from frames built
here when no corpus capture has the case (delayed delivery, redelivery requests).
"""

from __future__ import annotations

import datetime as dt
import io
import re

from rich.console import Console

import framebuild as fb
from corpus import CAPTURES, capture_path, manifest
from dissector.output.timeline import TimelineRenderer
from dissector.run import analysed_records


def lines(path, *types: str) -> list[str]:
    out = io.StringIO()
    renderer = TimelineRenderer(Console(file=out, width=400, color_system=None), plain=True)
    for rec in analysed_records(path, summary=True):
        if not types or rec["type"] in types:
            renderer.render(rec)
    return out.getvalue().splitlines()


def _id(mid: dict) -> str:
    return f"{mid['ledger_id']}:{mid['entry_id']}"


def test_a_reader_subscribe_shows_where_it_starts_and_that_it_is_not_durable():
    readers = {r["name"]: r for r in manifest("08_reader")["readers"]}
    subscribes = lines(capture_path("08_reader.pcap"), "SUBSCRIBE")
    for name, reader in readers.items():
        (line,) = [ln for ln in subscribes if f"name={name} " in ln]
        start = "earliest" if reader["start"] == "earliest" else _id(reader["start"])
        assert f"start={start} " in line and "durable=False" in line


def test_last_message_id_response_shows_the_id():
    last = _id(manifest("08_reader")["sent"][-1]["message_id"])
    responses = lines(capture_path("08_reader.pcap"), "GET_LAST_MESSAGE_ID_RESPONSE")
    assert responses and all(f" id={last} " in ln for ln in responses)


def test_seeks_show_the_message_id_and_the_time_as_a_date():
    m = manifest("07_seek")
    by_index = {int(e["properties"]["i"]): e for e in m["consumer_events"] if e.get("phase") == "initial"}
    seeks = lines(capture_path("07_seek.pcap"), "SEEK")
    assert len(seeks) == 2
    assert f" id={_id(m['sent'][5]['message_id'])} " in seeks[0]
    when = dt.datetime.fromtimestamp(by_index[15]["publish_timestamp_ms"] / 1000, dt.timezone.utc)
    assert re.search(r" time=(\S+)Z ", seeks[1])[1] == when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def test_batch_index_acks_are_marked_partial():
    acks = manifest("05b_batch_index_ack")["acks"]
    partial = [a for a in acks if a["type"] == "Individual" and a["message_id"]["batch_index"] >= 0]
    ack_lines = lines(capture_path("05b_batch_index_ack.pcap"), "ACK")
    assert len([ln for ln in ack_lines if "(partial)" in ln]) == len(partial) > 0


def test_one_style_of_keys_on_every_line_of_the_corpus():
    for path in sorted(CAPTURES.glob("*.pcap*")):
        text = "\n".join(lines(path))
        assert not re.search(r"\b(consumer_id|producer_id|request_id)=", text), path.name


def test_delayed_delivery_and_redelivery_requests_are_on_the_line(tmp_path):
    deliver_at = 1_700_000_123_456
    md = fb.metadata(sequence_id=0)
    md.deliver_at_time = deliver_at
    path = tmp_path / "delayed.pcap"
    fb.tcp_pcap(path, [("c", fb.simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1)),
                       ("c", fb.send_frame(b"later", producer_id=0, sequence_id=0, md=md)),
                       ("c", fb.simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=3)),
                       ("c", fb.simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=3,
                                             message_ids=[{"ledgerId": 7, "entryId": 9}]))])
    out = lines(path)
    (send,) = [ln for ln in out if re.search(r"\d SEND ", ln)]
    assert " deliver_at=2023-11-14T22:15:23.456Z" in send
    redeliver = [ln for ln in out if "REDELIVER_UNACKNOWLEDGED_MESSAGES" in ln]
    assert "cons=3" in redeliver[0] and "ids=all" in redeliver[0]
    assert "ids=7:9" in redeliver[1] and "ids=all" not in redeliver[1]
