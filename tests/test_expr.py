"""The expression language of `-Y` / `--filter` and of `check` rules (dissector/output/expr.py).

Hand-made records pin down every operator, literal, the precedence, list semantics, missing fields and the
derived `topic`; error cases check the 1-based column. A hypothesis property compares what the CLI prints for
`--json -Y EXPR` with the full `--json` output filtered by a reference evaluator written here, independently
of `compile_expr`. Expected values come from the hand-made records, the corpus manifests or the generated
expressions, never from our own output.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from corpus import capture_path, decoded, manifest
from dissector.cli.main import app
from dissector.output.expr import KNOWN_FIELDS, ExprError, compile_expr

runner = CliRunner()


def holds(expression: str, rec: dict) -> bool:
    return compile_expr(expression)(rec)


# A hand-made SEND-like record, an ERROR-like record and an event without index.
SEND = {
    "index": 9, "protocol": "pulsar", "time": 100.5, "conn": 3, "src": "127.0.0.1:40000", "dst": "127.0.0.1:6650",
    "direction": "to_broker", "packet": 14, "type": "SEND", "size": 77, "problems": [],
    "command": {"producer_id": 0, "sequence_id": 7, "message_id": {"partition": -1}},
    "checksum": "valid", "broker_entry_metadata": None, "encrypted": False, "payload_size": 0,
    "metadata": {"producer_name": "orders-producer", "sequence_id": 7},
    "messages": [{"payload_size": 16, "sequence_id": 7, "properties": {"tenant": "a", "kind": "x"}},
                 {"payload_size": 20, "sequence_id": 8, "properties": {"tenant": "b"}, "partition_key": "k1"}],
    "producer": {"id": 0, "topic": "persistent://acme/ns/orders", "name": "orders"},
}
ERROR = {
    "index": 78, "protocol": "pulsar", "time": 106.0, "conn": 10, "src": "127.0.0.1:6650",
    "dst": "127.0.0.1:59396", "direction": "to_client", "packet": 152, "type": "ERROR", "size": 39,
    "command": {"request_id": 1, "error": "UnknownError", "message": "Topic has no messages"},
    "problems": ["broker answered ERROR UnknownError: Topic has no messages"],
    "expert": [{"id": "response.slow", "severity": "warning", "message": "slow"},
               {"id": "server.error", "severity": "error", "message": "broker answered ERROR"}],
    "answers": 77, "latency_ms": 12.5, "request_type": "GET_LAST_MESSAGE_ID",
}
ACK = {"index": 30, "conn": 3, "type": "ACK", "command": {"consumer_id": 2}, "acks": [21, 23, 25], "problems": [],
       "consumer": {"id": 2, "topic": "persistent://acme/ns/audit", "name": "auditor"}, "encrypted": True}
EVENT = {"type": "UNANSWERED", "time": 109.0, "packet": 200, "conn": 10, "severity": "warning",
         "message": "GET_TOPICS_OF_NAMESPACE got no response", "details": {"request": 81}}


# ------------------------------------------------------------------------------------------------ operators
@pytest.mark.parametrize("expression, rec, expected", [
    ('type == "SEND"', SEND, True),
    ('type == "SEND"', ERROR, False),
    ('type != "SEND"', ERROR, True),
    ('type != "SEND"', SEND, False),
    ("conn < 10", SEND, True),
    ("conn < 10", ERROR, False),
    ("conn <= 10", ERROR, True),
    ("conn <= 9", ERROR, False),
    ("conn > 3", SEND, False),
    ("conn > 3", ERROR, True),
    ("conn >= 3", SEND, True),
    ("conn >= 4", SEND, False),
    ('type < "SENDZ"', SEND, True),  # strings order with strings
    ('type > "SENDZ"', SEND, False),
    ("latency_ms > size", ERROR, False),  # a field against a field: 12.5 > 39
    ("latency_ms < size", ERROR, True),
    ("answers < index", ERROR, True),
    ('type in {"ERROR", "SEND_ERROR"}', ERROR, True),
    ('type in {"ERROR", "SEND_ERROR"}', SEND, False),
    ("conn in {1, 3}", SEND, True),
    ("conn in {1, 2}", SEND, False),
    ("type in {}", SEND, False),
    ('"server.error" in expert.id', ERROR, True),
    ('"server.error" in expert.id', SEND, False),
    ('"checksum.invalid" in expert.id', ERROR, False),
    ("23 in acks", ACK, True),
    ("22 in acks", ACK, False),
    ('type matches "^SEND"', SEND, True),
    ('type matches "^SEND"', ERROR, False),
    ('type ~ "END$"', SEND, True),
    ('type ~ "ERR"', ERROR, True),  # a search, not a full match
    ('topic matches "persistent://acme/.*/orders"', SEND, True),
    ('command.message contains "no messages"', ERROR, True),
    ('command.message contains "No messages"', ERROR, False),  # case matters
    ('problems contains "UnknownError"', ERROR, True),  # a substring of a list element
    ("acks contains 25", ACK, True),  # a list element
    ("acks contains 24", ACK, False),
    ('type == "SEND" and conn == 3', SEND, True),
    ('type == "SEND" and conn == 4', SEND, False),
    ('type == "SEND" && conn == 3', SEND, True),
    ('type == "SEND" && conn == 4', SEND, False),
    ('type == "ERROR" or conn == 3', SEND, True),
    ('type == "ERROR" or conn == 4', SEND, False),
    ('type == "ERROR" || conn == 3', SEND, True),
    ('type == "ERROR" || conn == 4', SEND, False),
    ('not type == "SEND"', SEND, False),
    ('not type == "SEND"', ERROR, True),
    ('!type == "SEND"', SEND, False),
    ('! (type == "SEND")', ERROR, True),
    ("not not conn == 3", SEND, True),
    ("latency_ms", ERROR, True),  # bare field: present and truthy
    ("latency_ms", SEND, False),  # absent
    ("expert", ERROR, True),
    ("expert", SEND, False),
    ("acks", ACK, True),
    ("encrypted", ACK, True),
    ("encrypted", SEND, False),  # false
    ("payload_size", SEND, False),  # zero
    ("problems", SEND, False),  # an empty list
    ("problems", ERROR, True),
    ("broker_entry_metadata", SEND, False),  # null
    ("index", EVENT, False),  # events have no index
    ("severity", EVENT, True),
    ('(type == "SEND")', SEND, True),
    ('((type == "SEND") and (conn == 3))', SEND, True),
])
def test_operator(expression, rec, expected):
    assert holds(expression, rec) is expected


@pytest.mark.parametrize("expression, rec, expected", [
    ('type == "SEND"', SEND, True),  # double quotes
    ("type == 'SEND'", SEND, True),  # single quotes
    ("type == 'SEND_RECEIPT'", SEND, False),
    ('metadata.producer_name == "orders-producer"', SEND, True),
    (r'command.message == "Topic has no \"messages\""', dict(ERROR, command={"message": 'Topic has no "messages"'}),
     True),  # an escaped double quote
    ("""command.message == 'say "hi"'""", dict(ERROR, command={"message": 'say "hi"'}), True),
    (r'command.message == "tab\there"', dict(ERROR, command={"message": "tab\there"}), True),
    (r'command.message == "\u00e9t\u00e9"', dict(ERROR, command={"message": "été"}), True),
    ("conn == 3", SEND, True),  # int
    ("conn == 3.0", SEND, True),  # an int equals the same float
    ("latency_ms == 12.5", ERROR, True),  # float
    ("latency_ms == 12.4", ERROR, False),
    ("latency_ms > 1e1", ERROR, True),  # exponent
    ("latency_ms < 1.25e1", ERROR, False),
    ("command.message_id.partition == -1", SEND, True),  # negative
    ("command.message_id.partition > -2", SEND, True),
    ("encrypted == true", ACK, True),
    ("encrypted == false", ACK, False),
    ("encrypted == false", SEND, True),
    ("encrypted == 1", ACK, False),  # booleans are not numbers
    ("encrypted == 0", SEND, False),
    ("conn == true", SEND, False),
    ('conn == "3"', SEND, False),  # strings compare with strings only
    ('conn < "4"', SEND, False),
    ("broker_entry_metadata == null", SEND, True),
    ("broker_entry_metadata != null", SEND, False),
    ("broker_entry_metadata == null", ERROR, False),  # absent is not null
    ('broker_entry_metadata == "x"', SEND, False),
    ('conn in {"3", true, null, 3.0}', SEND, True),
    ('conn in {"3", true, null}', SEND, False),
    ("broker_entry_metadata in {null}", SEND, True),
])
def test_literal(expression, rec, expected):
    assert holds(expression, rec) is expected


# ----------------------------------------------------------------------------------------------- precedence
A_TRUE = 'type == "SEND"'  # true on SEND
B_FALSE = "conn == 99"  # false on SEND
C_FALSE = 'checksum == "invalid"'  # false on SEND
D_TRUE = "conn == 3"  # true on SEND


@pytest.mark.parametrize("expression, expected, wrong", [
    # not binds tighter than and: (not B) and C = False, not (B and C) = True
    (f"not {B_FALSE} and {C_FALSE}", False, "not (B and C)"),
    (f"! {B_FALSE} && {C_FALSE}", False, "not (B and C)"),
    # not binds tighter than or: (not A) or D = True, not (A or D) = False
    (f"not {A_TRUE} or {D_TRUE}", True, "not (A or D)"),
    (f"! {A_TRUE} || {D_TRUE}", True, "not (A or D)"),
    # and binds tighter than or: A or (B and C) = True, (A or B) and C = False
    (f"{A_TRUE} or {B_FALSE} and {C_FALSE}", True, "(A or B) and C"),
    (f"{A_TRUE} || {B_FALSE} && {C_FALSE}", True, "(A or B) and C"),
    # ... on either side: (B and C) or A = True, B and (C or A) = False
    (f"{B_FALSE} and {C_FALSE} or {A_TRUE}", True, "B and (C or A)"),
    # parentheses override: (A or B) and C = False
    (f"({A_TRUE} or {B_FALSE}) and {C_FALSE}", False, "A or (B and C)"),
    (f"not ({B_FALSE} and {C_FALSE})", True, "(not B) and C"),
    # not ... and ... or: ((not A) and B) or D = True; not (A and B or D) = False
    (f"not {A_TRUE} and {B_FALSE} or {D_TRUE}", True, "not (A and B or D)"),
])
def test_precedence(expression, expected, wrong):
    assert holds(expression, SEND) is expected, f"evaluated as {wrong}"


def test_precedence_sanity():
    """The building blocks of test_precedence are what they say."""
    assert [holds(e, SEND) for e in (A_TRUE, B_FALSE, C_FALSE, D_TRUE)] == [True, False, False, True]


def test_keywords_as_name_prefixes():
    """Field names that start with a keyword (index, ordering_key, notes...) are names, not keywords."""
    rec = {"index": 4, "messages": [{"ordering_key": "o1"}], "consumer": {"name": "notifier", "inflight": 2}}
    assert holds("index == 4", rec)
    assert holds('messages.ordering_key == "o1"', rec)
    assert holds("consumer.inflight == 2", rec)
    assert holds('consumer.name == "notifier" and index == 4', rec)


# ----------------------------------------------------------------------------------------- list semantics
@pytest.mark.parametrize("expression, expected", [
    ('messages.properties.tenant == "b"', True),  # the second message
    ('messages.properties.tenant == "a"', True),  # the first
    ('messages.properties.tenant == "c"', False),
    ('messages.properties.tenant != "a"', True),  # any element differs
    ('messages.properties.kind != "x"', False),  # the only message with a kind has "x"
    ("messages.payload_size > 18", True),
    ("messages.payload_size > 20", False),
    ('messages.partition_key == "k1"', True),  # only on the second message
    ('"b" in messages.properties.tenant', True),
    ('messages.properties.tenant in {"c", "b"}', True),
    ('messages.properties.tenant matches "^[b-z]$"', True),
    ('messages.properties.tenant matches "^[c-z]$"', False),
    ("messages.sequence_id == 8 and messages.sequence_id == 7", True),  # each any-element on its own
    ("messages", True),
    ("messages.properties.kind", True),
    ("messages.bogus", False),  # a nested name no record has is not an error, just absent
    ("messages.bogus == 1", False),
])
def test_list_semantics_messages(expression, expected):
    assert holds(expression, SEND) is expected


@pytest.mark.parametrize("expression, expected", [
    ('expert.severity == "error"', True),
    ('expert.severity == "note"', False),
    ('expert.id == "response.slow"', True),
    ('expert.id != "server.error"', True),  # the other element
    ('expert.id matches "^server\\\\."', True),
    ('expert.message contains "broker"', True),
    ('expert.id in {"chunk.lost", "server.error"}', True),
    ('expert.id in {"chunk.lost"}', False),
])
def test_list_semantics_expert(expression, expected):
    assert holds(expression, ERROR) is expected


@pytest.mark.parametrize("expression", [
    "latency_ms == 12.5", "latency_ms != 12.5", "latency_ms != 1", "latency_ms < 1", "latency_ms <= 1e9",
    "latency_ms > -1", "latency_ms >= 0", 'request_type == "SEND"', 'request_type != "SEND"',
    "latency_ms in {12.5, 1}", '"x" in expert.id', 'request_type matches ".*"', 'request_type contains ""',
    "command.nothing != 1", 'command.nothing == "x"', 'checksum != "valid"', "checksum_detail != null",
    "latency_ms != null", "latency_ms", "command.nothing",
])
def test_missing_field_makes_a_comparison_false(expression):
    rec = {k: v for k, v in SEND.items() if k not in ("checksum",)}  # no latency, no request_type, no checksum
    assert holds(expression, rec) is False
    assert holds(f"not ({expression})", rec) is True


def test_comparisons_of_mismatched_types_are_false():
    assert not holds('conn == "3"', SEND) and not holds('conn != "3"', SEND)
    assert not holds('type < 5', SEND) and not holds('type > 5', SEND)
    assert not holds("encrypted < 1", ACK) and not holds("encrypted >= 1", ACK)


def test_ordering_comparisons_with_null_or_objects_are_false_not_errors():
    """README: a comparison that cannot hold is false, never an error. Ordering nulls or objects is such a case."""
    for expression in ("broker_entry_metadata < null", "broker_entry_metadata >= null", "metadata < metadata",
                       "command > command"):
        assert holds(expression, SEND) is False, expression


@pytest.mark.parametrize("rec, topic", [
    ({"type": "LOOKUP", "command": {"topic": "persistent://t/ns/cmd"}}, "persistent://t/ns/cmd"),
    ({"type": "SEND", "command": {}, "producer": {"topic": "persistent://t/ns/prod"}}, "persistent://t/ns/prod"),
    ({"type": "ACK", "command": {}, "consumer": {"topic": "persistent://t/ns/cons"}}, "persistent://t/ns/cons"),
    # the command's topic first, then the producer's
    ({"type": "PRODUCER", "command": {"topic": "persistent://t/ns/cmd"},
      "producer": {"topic": "persistent://t/ns/other"}}, "persistent://t/ns/cmd"),
    ({"type": "X", "command": {}, "producer": {"topic": None}, "consumer": {"topic": "persistent://t/ns/cons"}},
     "persistent://t/ns/cons"),
])
def test_derived_topic(rec, topic):
    assert holds(f"topic == {json.dumps(topic)}", rec)
    assert not holds(f"topic != {json.dumps(topic)}", rec)
    assert holds(f'topic matches "^{re.escape(topic.rsplit("/", 1)[0])}/"', rec)
    assert holds("topic", rec)
    assert not holds('topic == "persistent://t/ns/none"', rec)


def test_derived_topic_absent():
    rec = {"type": "PING", "command": {}}
    assert not holds('topic == "x"', rec) and not holds('topic != "x"', rec) and not holds("topic", rec)
    assert "topic" in KNOWN_FIELDS


def test_derived_topic_on_real_records():
    """Every SEND of the basic capture is about the manifest's topic, and so are the receipts and MESSAGEs."""
    m = manifest("01_basic_nonbatched")
    recs = decoded("01_basic_nonbatched.pcap")
    predicate = compile_expr(f"topic == {json.dumps(m['topic'])}")
    census = _census(m)
    for kind in ("SEND", "SEND_RECEIPT", "MESSAGE"):
        assert sum(1 for r in recs if r["type"] == kind and predicate(r)) == census[kind]


# --------------------------------------------------------------------------------------------------- errors
def _col(expression: str, fragment: str, nth: int = 0) -> int:
    pos = -1
    for _ in range(nth + 1):
        pos = expression.index(fragment, pos + 1)
    return pos + 1


@pytest.mark.parametrize("expression, column", [
    ('type == "SEND" and bogus == 1', _col('type == "SEND" and bogus == 1', "bogus")),
    ("bogus", 1),
    ("bogus.x == 1", 1),
    ('  latencyms > 20', 3),
    ('type in {"A"} or not (conn == 1 and Type == "X")', _col('type in {"A"} or not (conn == 1 and Type == "X")',
                                                             "Type")),
    ('"x" in expertise.id', _col('"x" in expertise.id', "expertise")),
])
def test_unknown_field_column(expression, column):
    with pytest.raises(ExprError) as info:
        compile_expr(expression)
    assert info.value.column == column
    name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", expression[column - 1:])[0]
    assert repr(name) in info.value.message  # names the unknown field
    assert f"column {column}" in info.value.describe()


@pytest.mark.parametrize("expression, column", [
    ("type == 1 2", _col("type == 1 2", "2")),  # an unexpected token
    ('type == "A")', _col('type == "A")', ")")),
    ("type === 1", _col("type === 1", "=", 2)),  # the third '='
    ('type == "A" @ 1', _col('type == "A" @ 1', "@")),
    ('type == "x', _col('type == "x', '"')),  # an unterminated string starts at its quote
    ("and type", 1),
    ('type in {"A",}', _col('type in {"A",}', "}")),
    ("type ~ 3", _col("type ~ 3", "3")),  # matches takes a string
    ("type ==", len("type ==") + 1),  # the expression ends too soon: the column after its end
    ('type == "SEND" and', len('type == "SEND" and') + 1),
    ('(type == "A"', len('(type == "A"') + 1),
    ("not", len("not") + 1),
    ("", 1),
])
def test_syntax_error_column(expression, column):
    with pytest.raises(ExprError) as info:
        compile_expr(expression)
    assert info.value.column == column
    lines = info.value.describe().splitlines()
    assert lines[-1].index("^") - 2 == column - 1  # the caret under the column, after the 2-space indent


@pytest.mark.parametrize("expression", ['type == "\\q"', 'type == "\\x41"', 'type == "a\\'])
def test_bad_escape_in_a_string_is_an_expr_error(expression):
    """A double-quoted string with an escape JSON does not know is a syntax error, not a crash."""
    with pytest.raises(ExprError) as info:
        compile_expr(expression)
    assert info.value.column is not None and 1 <= info.value.column <= len(expression)


@pytest.mark.parametrize("pattern", ["(", "[a-", "*x", "a{2,1}"])
def test_bad_regex(pattern):
    expression = f'topic matches "{pattern}"'
    with pytest.raises(ExprError) as info:
        compile_expr(expression)
    assert pattern in str(info.value)


def test_bad_regex_column_points_at_the_pattern():
    """README: a bad regular expression is an error with its column."""
    expression = 'type == "SEND" and topic matches "(unclosed"'
    with pytest.raises(ExprError) as info:
        compile_expr(expression)
    start = _col(expression, '"(unclosed"')
    assert start <= info.value.column < start + len('"(unclosed"')  # on the pattern, at the error if known


def test_expr_error_is_a_value_error():
    with pytest.raises(ValueError):
        compile_expr("type ==")


# ------------------------------------------------------------------------------------------------- the CLI
BASIC = capture_path("01_basic_nonbatched.pcap")
BAD = 'type == "SEND" and bogus == 1'
BAD_SYNTAX = 'type == "SEND" and and'


def _cli(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("command", [
    ["dissect", BASIC, "--json"], ["dissect", BASIC], ["stats", BASIC], ["stats", BASIC, "--json"],
    ["follow", BASIC, "--producer", manifest("01_basic_nonbatched")["producer"]["producer_name"]],
])
@pytest.mark.parametrize("expression, fragment", [(BAD, "bogus"), (BAD_SYNTAX, "and")])
def test_cli_bad_filter_exits_2_with_the_column(command, expression, fragment):
    column = _col(expression, fragment, 1 if fragment == "and" else 0)
    res = _cli(*command, "-Y", expression)
    assert res.exit_code == 2, res.output
    assert f"column {column}" in res.stderr
    assert res.stdout == ""  # nothing decoded or printed before the error
    res = _cli(*command, "--filter", expression)
    assert res.exit_code == 2 and f"column {column}" in res.stderr


@pytest.mark.parametrize("command", [["dissect", BASIC, "--json"], ["stats", BASIC]])
def test_cli_bad_regex_exits_2(command):
    res = _cli(*command, "-Y", 'topic matches "("')
    assert res.exit_code == 2, res.output
    assert "(" in res.stderr and "Traceback" not in res.output


@pytest.mark.parametrize("expression", ['type == "\\q"', "broker_entry_metadata <= null"])
def test_cli_never_crashes_on_an_expression(expression):
    """A bad escape exits 2 with a message; an ordering of nulls selects nothing: neither is a traceback."""
    res = _cli("dissect", BASIC, "--json", "-Y", expression)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in (0, 2)


def _census(m: dict) -> Counter:
    c = Counter()
    for stream in m["derived_frame_census"]["streams"]:
        for side in ("client_to_broker", "broker_to_client"):
            c.update(stream[side]["by_type"])
    return c


def _json_records(*args) -> list[dict]:
    res = _cli("dissect", *args, "--json")
    assert res.exit_code == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("stem", ["01_basic_nonbatched", "11_errors"])
def test_cli_filter_counts_match_the_manifest(stem):
    census = _census(manifest(stem))
    path = capture_path(f"{stem}.pcap")
    for kind in ("SEND", "LOOKUP", "CONNECT", "ERROR"):
        got = _json_records(path, "-Y", f'type == "{kind}"')
        assert len(got) == census.get(kind, 0) and all(r["type"] == kind for r in got)
    both = _json_records(path, "-Y", 'type in {"ERROR", "SEND_ERROR"}')
    assert len(both) == census.get("ERROR", 0) + census.get("SEND_ERROR", 0)


def test_stats_with_filter_counts_only_selected_frames():
    census = _census(manifest("01_basic_nonbatched"))
    whole = _cli("stats", BASIC, "--json")
    only = _cli("stats", BASIC, "--json", "-Y", 'type == "SEND" or type == "ACK"')
    none = _cli("stats", BASIC, "--json", "-Y", 'type == "NO_SUCH_TYPE"')
    assert whole.exit_code == only.exit_code == none.exit_code == 0, only.stderr
    assert json.loads(whole.stdout)["types"] == {k: v for k, v in census.items()}
    assert json.loads(only.stdout)["types"] == {"SEND": census["SEND"], "ACK": census["ACK"]}
    assert json.loads(only.stdout)["frames"] == census["SEND"] + census["ACK"]
    assert json.loads(none.stdout)["frames"] == 0


def test_follow_with_filter():
    m = manifest("01_basic_nonbatched")
    producer = m["producer"]["producer_name"]
    res = _cli("follow", BASIC, "--producer", producer, "--json", "-Y", 'type == "SEND"')
    assert res.exit_code == 0, res.stderr
    got = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    assert len(got) == len(m["sent"]) and {r["type"] for r in got} == {"SEND"}
    assert {r["producer"]["name"] for r in got} == {producer}


# ---------------------------------------------------------------------------- selecting keeps the analysis
@pytest.mark.parametrize("stem", ["01_basic_nonbatched", "02_batching_props_keys"])
def test_selecting_frames_does_not_change_the_analysis(stem):
    path = capture_path(f"{stem}.pcap")
    census = _census(manifest(stem))
    everything = _json_records(path)
    receipts = _json_records(path, "-Y", 'type == "SEND_RECEIPT"')
    assert len(receipts) == census["SEND_RECEIPT"] > 0
    by_index = {r["index"]: r for r in everything if "index" in r}
    for r in receipts:
        full = by_index[r["index"]]
        assert r == full
        assert r["answers"] == full["answers"] and r["latency_ms"] == full["latency_ms"]
        assert by_index[r["answers"]]["type"] == "SEND"  # the request it answers is in the full output
        assert r["latency_ms"] == pytest.approx((r["time"] - by_index[r["answers"]]["time"]) * 1000, abs=0.002)


# ------------------------------------------------------------------------------------- the property: CLI == ref
# A reference evaluator, written here from the README's description (not with compile_expr).
MISSING = object()


def ref_values(rec: dict, path: tuple[str, ...]) -> list:
    if path[0] == "topic" and "topic" not in rec:
        topic = None
        cmd = rec.get("command")
        if isinstance(cmd, dict) and "topic" in cmd:
            topic = cmd["topic"]
        else:
            for key in ("producer", "consumer"):
                actor = rec.get(key)
                if isinstance(actor, dict) and actor.get("topic") is not None:
                    topic = actor["topic"]
                    break
        current = [] if topic is None else [topic]
        path = path[1:]
    else:
        current = [rec]
    for name in path:
        nxt = []
        for value in current:
            if isinstance(value, dict) and name in value:
                item = value[name]
                nxt.extend(item if isinstance(item, list) else [item])
        current = nxt
    return current


def ref_comparable(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return True
    return isinstance(a, str) and isinstance(b, str) or (a is None and b is None)


def ref_compare(a, op, b) -> bool:
    if not ref_comparable(a, b):
        return False
    if op in ("==", "!="):
        return (a == b) is (op == "==")
    if a is None or b is None:
        return False
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def ref_eval(node, rec) -> bool:
    kind = node[0]
    if kind == "cmp":
        _, left, op, right = node
        lv = ref_values(rec, left[1]) if left[0] == "field" else [left[1]]
        rv = ref_values(rec, right[1]) if right[0] == "field" else [right[1]]
        return any(ref_compare(a, op, b) for a in lv for b in rv)
    if kind == "inset":
        return any(ref_compare(a, "==", b) for a in ref_values(rec, node[1]) for b in node[2])
    if kind == "infield":
        return any(ref_compare(node[1], "==", b) for b in ref_values(rec, node[2]))
    if kind == "matches":
        return any(isinstance(a, str) and re.search(node[2], a) is not None for a in ref_values(rec, node[1]))
    if kind == "contains":
        b = node[2]
        return any((isinstance(a, str) and isinstance(b, str) and b in a) or ref_compare(a, "==", b)
                   for a in ref_values(rec, node[1]))
    if kind == "truthy":
        return any(bool(v) for v in ref_values(rec, node[1]))
    if kind == "not":
        return not ref_eval(node[1], rec)
    if kind == "and":
        return ref_eval(node[1], rec) and ref_eval(node[2], rec)
    if kind == "or":
        return ref_eval(node[1], rec) or ref_eval(node[2], rec)
    raise AssertionError(kind)


def render_literal(value, quote: str) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        if quote == "'" and "'" not in value:
            return f"'{value}'"
        return json.dumps(value)
    return repr(value)


PRECEDENCE = {"or": 1, "and": 2, "not": 3}


def render(node, draw_spelling) -> str:
    """Text with only the parentheses precedence needs (plus some extra, at random)."""
    kind = node[0]
    if kind in ("and", "or"):
        word = draw_spelling(kind)
        parts = []
        for child in node[1:]:
            text = render(child, draw_spelling)
            if child[0] in PRECEDENCE and PRECEDENCE[child[0]] < PRECEDENCE[kind] or draw_spelling("paren"):
                text = f"({text})"
            parts.append(text)
        return f" {word} ".join(parts)
    if kind == "not":
        child = node[1]
        text = render(child, draw_spelling)
        if child[0] in ("and", "or") or draw_spelling("paren"):
            text = f"({text})"
        return f"{draw_spelling('not')} {text}"
    q = draw_spelling("quote")
    if kind == "cmp":
        _, left, op, right = node
        side = [".".join(s[1]) if s[0] == "field" else render_literal(s[1], q) for s in (left, right)]
        return f"{side[0]} {op} {side[1]}"
    if kind == "inset":
        return f"{'.'.join(node[1])} in {{{', '.join(render_literal(v, q) for v in node[2])}}}"
    if kind == "infield":
        return f"{render_literal(node[1], q)} in {'.'.join(node[2])}"
    if kind == "matches":
        return f"{'.'.join(node[1])} {draw_spelling('matches')} {render_literal(node[2], q)}"
    if kind == "contains":
        return f"{'.'.join(node[1])} contains {render_literal(node[2], q)}"
    if kind == "truthy":
        return ".".join(node[1])
    raise AssertionError(kind)


PROPERTY_CAPTURES = ("11_errors.pcap", "02_batching_props_keys.pcap")
SCALAR_FIELDS = ["type", "conn", "latency_ms", "request_type", "checksum", "direction", "size", "answers",
                 "command.request_id", "command.error", "command.producer_id", "command.sequence_id",
                 "producer.name", "consumer.name", "topic", "severity", "packet", "payload_size",
                 "messages.properties.kind", "messages.properties.parity", "messages.partition_key",
                 "messages.payload_size", "messages.batch_index", "expert.id", "expert.severity", "problems",
                 "command.protocol_version", "details.how"]
LIST_FIELDS = ["expert.id", "acks", "problems", "messages.partition_key", "messages.properties.i"]
NULLABLE_FIELDS = ["broker_entry_metadata"]  # null-valued: == and != only (ordering nulls is a known-bad area)
TRUTHY_FIELDS = SCALAR_FIELDS + ["expert", "messages", "acks", "encrypted", "broker_entry_metadata", "metadata",
                                 "permits", "index"]
PATTERNS = ["^SEND", "RESPONSE$", "ERR", "basic|err|batch", "key-[0-3]$", "\\d", "^persistent://public/default/",
            "has space", "^[a-z]+$", "Error", "^(?!CONNECT)"]
EXTRA_VALUES = ["nope", "", 0, -1, 1, 2.5, 1e9, True, False]


def _pool(records, field: str) -> list:
    values = {json.dumps(v) for r in records for v in ref_values(r, tuple(field.split(".")))
              if not isinstance(v, (dict, list)) and v is not None}
    return sorted((json.loads(v) for v in values), key=repr)[:40]


@st.composite
def expressions(draw, pools):

    def leaf():
        kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "inset", "infield", "matches", "contains", "truthy",
                                     "null"]))
        if kind == "null":
            field = draw(st.sampled_from(NULLABLE_FIELDS))
            return ("cmp", ("field", tuple(field.split("."))), draw(st.sampled_from(["==", "!="])),
                    ("lit", None))
        if kind == "truthy":
            return ("truthy", tuple(draw(st.sampled_from(TRUTHY_FIELDS)).split(".")))
        if kind == "infield":
            field = draw(st.sampled_from(LIST_FIELDS))
            return ("infield", draw(st.sampled_from(pools[field])), tuple(field.split(".")))
        field = draw(st.sampled_from(SCALAR_FIELDS))
        path = tuple(field.split("."))
        if kind == "matches":
            return ("matches", path, draw(st.sampled_from(PATTERNS)))
        if kind == "contains":
            value = draw(st.sampled_from(pools[field]))
            if isinstance(value, str) and value and draw(st.booleans()):
                start = draw(st.integers(0, len(value) - 1))
                value = value[start:start + draw(st.integers(1, 6))]  # a substring
            return ("contains", path, value)
        if kind == "inset":
            return ("inset", path, tuple(draw(st.lists(st.sampled_from(pools[field]), max_size=3))))
        op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
        if draw(st.integers(0, 9)) == 0:  # a field against a field
            other = tuple(draw(st.sampled_from(SCALAR_FIELDS)).split("."))
            return ("cmp", ("field", path), op, ("field", other))
        value = draw(st.sampled_from(pools[field]))
        sides = [("field", path), ("lit", value)]
        if draw(st.integers(0, 4)) == 0:
            sides.reverse()  # a literal on the left
        return ("cmp", sides[0], op, sides[1])

    def tree(depth):
        if depth == 0 or draw(st.integers(0, 2)) == 0:
            return leaf()
        kind = draw(st.sampled_from(["and", "or", "not"]))
        if kind == "not":
            return ("not", tree(depth - 1))
        return (kind, tree(depth - 1), tree(depth - 1))

    node = tree(3)
    spellings = {"and": ["and", "&&"], "or": ["or", "||"], "not": ["not", "!"], "matches": ["matches", "~"],
                 "quote": ['"', "'"]}

    def draw_spelling(what):
        if what == "paren":
            return draw(st.integers(0, 5)) == 0
        return draw(st.sampled_from(spellings[what]))

    return node, render(node, draw_spelling)


@pytest.mark.parametrize("name", PROPERTY_CAPTURES)
def test_cli_filter_equals_the_reference_evaluator(name):
    path = capture_path(name)
    records = list(decoded(name))
    # The CLI's unfiltered --json is the corpus records (the baseline the property filters).
    assert _json_records(path) == records

    pools = {f: _pool(records, f) + EXTRA_VALUES for f in set(SCALAR_FIELDS + LIST_FIELDS)}

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(expressions(pools))
    def check(case):
        node, text = case
        res = runner.invoke(app, ["dissect", str(path), "--json", "-Y", text])
        assert res.exit_code == 0, f"{text!r}: {res.stderr}"
        got = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
        expected = [r for r in records if ref_eval(node, r)]
        assert got == expected, f"{text!r}: CLI selected {len(got)}, the reference {len(expected)}"

    check()


def test_reference_evaluator_is_not_trivial():
    """The property would prove little if the generated expressions all selected everything or nothing: the
    reference selects a strict, non-empty subset for typical leaves."""
    records = list(decoded("11_errors.pcap"))
    for node in [("cmp", ("field", ("type",)), "==", ("lit", "ERROR")),
                 ("matches", ("type",), "RESPONSE$"),
                 ("infield", "server.error", ("expert", "id")),
                 ("not", ("truthy", ("latency_ms",)))]:
        n = sum(1 for r in records if ref_eval(node, r))
        assert 0 < n < len(records), node


def test_per_message_fields_select_alike_in_json_timeline_and_stats():
    """`-Y 'messages.properties.kind == ...'` (the README's example form) selects the same frames whether the
    output is JSON, the timeline or stats: every SEND and MESSAGE of the batching capture, whose sent messages
    all carry that property (from the manifest)."""
    stem = "02_batching_props_keys"
    m, census = manifest(stem), _census(manifest(stem))
    kinds = {x["properties"]["kind"] for x in m["sent"]}
    assert len(kinds) == 1
    expression = f'messages.properties.kind == "{kinds.pop()}"'
    path = capture_path(f"{stem}.pcap")
    expected = census["SEND"] + census["MESSAGE"]
    assert len(_json_records(path, "-Y", expression)) == expected
    text = _cli("dissect", path, "--plain", "-Y", expression)
    assert text.exit_code == 0
    assert len([line for line in text.stdout.splitlines() if re.match(r"\s*\d+\s", line)]) == expected
    stats = _cli("stats", path, "--json", "-Y", expression)
    assert stats.exit_code == 0 and json.loads(stats.stdout)["frames"] == expected
