"""`report` (one self-contained HTML file) and `follow --message` (a message's journey).

The summary the page embeds and shows must be `stats --json`; journeys are checked against what the client API
sent and received (the captures' manifests) and against the raw wire fields (message ids on SEND_RECEIPT,
MESSAGE and ACK frames), never against our own joins; the page is opened in Debian's chromium (Playwright
with executable_path, no downloaded browser): no console error, no dialog, filters narrow, journeys show
their frames, hostile wire strings render as text. Screenshots go to tests/artifacts/ (gitignored).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import framebuild as fb
ORACLE_MISSING = "oracle missing: "  # the skip prefix CI turns into a failure (conftest.py)
from corpus import capture_path, decoded, manifest

CLI = [str(Path(sys.executable).parent / "pulsar-dissect")]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=600, **kwargs)


def embedded(page: str, element_id: str):
    """The JSON of a <script type="application/json"> element of the page."""
    match = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', page, re.S)
    assert match, element_id
    return json.loads(match.group(1))


def build_report(capture: Path, out: Path, *extra: str) -> tuple[str, dict]:
    res = run("report", str(capture), "-o", str(out), *extra)
    assert res.returncode == 0, res.stderr
    page = out.read_text(encoding="utf-8")
    return page, embedded(page, "report-data")


def stats_json(capture: Path, *extra: str) -> dict:
    res = run("stats", str(capture), "--json", *extra)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


CORPUS = ["01_basic_nonbatched.pcap", "02_batching_props_keys.pcap", "05_cumulative_ack.pcap",
          "05b_batch_index_ack.pcap", "09_shared.pcap", "11_errors.pcap", "11b_send_error_too_big.pcap",
          "tubemq/tubemq_consumer_broker.pcap"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    """capture name -> (page, document), each built once."""
    out = tmp_path_factory.mktemp("reports")
    return {name: build_report(capture_path(name), out / (Path(name).name + ".html")) for name in CORPUS}


# ------------------------------------------------------------------------------------ the data in the page
@pytest.mark.parametrize("name", CORPUS)
def test_the_summary_is_stats_json(reports, name):
    _, doc = reports[name]
    assert doc["summary"] == stats_json(capture_path(name))


def test_a_build_time_filter_gives_the_stats_of_the_same_filter(tmp_path):
    cap = capture_path("11_errors.pcap")
    expression = 'type in {"ERROR", "SUBSCRIBE", "SUCCESS"}'
    _, doc = build_report(cap, tmp_path / "r.html", "-Y", expression)
    assert doc["summary"] == stats_json(cap, "-Y", expression)
    assert doc["filter"] == expression
    assert {row[doc["table"]["columns"].index("type")] for row in doc["table"]["rows"]} <= \
        {"ERROR", "SUBSCRIBE", "SUCCESS"}


def test_every_frame_is_a_row_and_the_latency_histograms_count_every_response(reports):
    _, doc = reports["02_batching_props_keys.pcap"]
    columns = doc["table"]["columns"]
    frames = [r for r in decoded("02_batching_props_keys.pcap") if "index" in r]
    rows = [r for r in doc["table"]["rows"] if r[columns.index("index")] is not None]
    assert [r[columns.index("index")] for r in rows] == [f["index"] for f in frames]
    assert [r[columns.index("type")] for r in rows] == [f["type"] for f in frames]
    answered = {}
    for f in frames:
        if "latency_ms" in f:
            answered[f["request_type"]] = answered.get(f["request_type"], 0) + 1
    assert {k: sum(v["bins"]) for k, v in doc["latency"]["histograms"].items()} == answered
    details = embedded(reports["02_batching_props_keys.pcap"][0], "report-details")
    send = next(d for d in details if d and d.get("type") == "SEND")
    assert send["metadata"] and len(send["messages"]) == 50 and send["messages_not_shown"] == 50  # 100 a batch


def test_the_cap_keeps_the_first_frames_and_says_how_many_were_left_out(tmp_path):
    cap = capture_path("02_batching_props_keys.pcap")
    _, doc = build_report(cap, tmp_path / "r.html", "--max-frames", "7")
    records = len(decoded("02_batching_props_keys.pcap"))
    assert doc["table"]["kept"] == 7 == len(doc["table"]["rows"])
    assert doc["table"]["omitted"] == records - 7
    assert doc["summary"] == stats_json(cap)  # the figures still cover the whole capture


# ------------------------------------------------------------------------------------ journeys vs manifests
def _wire_ids(value) -> list[tuple[int, int]]:
    items = value if isinstance(value, list) else [value]
    return [(i["ledgerId"], i["entryId"]) for i in items if isinstance(i, dict) and "ledgerId" in i]


def _frames_carrying(name: str, ledger: int, entry: int) -> dict[str, set[int]]:
    """Frame indexes whose own wire fields name the entry: the receipt, the deliveries, the acks."""
    out: dict[str, set[int]] = {"SEND_RECEIPT": set(), "MESSAGE": set(), "ACK": set()}
    for r in decoded(name):
        if r.get("type") in out and (ledger, entry) in _wire_ids((r.get("command") or {}).get("message_id")):
            out[r["type"]].add(r["index"])
    return out


def _received(m: dict) -> list[tuple[dict, str | None]]:
    """(message, consumer name) of every message the manifest says a consumer received."""
    if "received_by_consumer" in m:
        return [(msg, consumer) for consumer, msgs in m["received_by_consumer"].items() for msg in msgs]
    return [(msg, None) for msg in m.get("received", [])]


JOURNEY_CAPTURES = ["01_basic_nonbatched", "05_cumulative_ack", "05b_batch_index_ack", "09_shared",
                    "02_batching_props_keys"]


@pytest.mark.parametrize("stem", JOURNEY_CAPTURES)
def test_every_received_message_has_its_whole_journey(reports, stem):
    m = manifest(stem)
    _, doc = reports[stem + ".pcap"]
    columns = doc["table"]["columns"]
    type_of = {r[columns.index("index")]: r[columns.index("type")] for r in doc["table"]["rows"]}
    journeys = {(j["topic"], j["id"]): j for j in doc["journeys"]["rows"]}
    sent = {(s["message_id"]["ledger_id"], s["message_id"]["entry_id"]): s for s in m["sent"]}
    received = _received(m)
    assert received
    for msg, consumer in received:
        mid = msg["message_id"]
        ledger, entry = mid["ledger_id"], mid["entry_id"]
        journey = journeys[(msg["topic"] if "topic" in msg else m["topic"], f"{ledger}:{entry}")]
        kinds = {type_of[i] for i in journey["frames"]}
        assert {"SEND", "SEND_RECEIPT", "MESSAGE", "ACK"} <= kinds, (mid, kinds)
        wire = _frames_carrying(stem + ".pcap", ledger, entry)
        assert wire["SEND_RECEIPT"] <= set(journey["frames"]) and wire["MESSAGE"] <= set(journey["frames"])
        assert journey["producer"] == msg["producer_name"]
        if consumer is not None:
            assert consumer in {d[2] for d in journey["deliveries"]}
        assert (ledger, entry) in sent
        assert journey["publish_ms"] is not None and journey["publish_ms"] > 0
        assert all(d[5] is not None for d in journey["deliveries"])  # every delivery acknowledged


def test_a_batch_index_ack_acks_only_its_entries_of_the_batch():
    """05b: the consumer acks the even messages of the first two entries one by one (ack_set), then all
    cumulatively: an even message's journey has its own Individual ACK, an odd one only the Cumulative."""
    m = manifest("05b_batch_index_ack")
    individually = {(a["message_id"]["entry_id"], a["message_id"]["batch_index"]) for a in m["acks"]
                    if a["type"] == "Individual"}
    assert individually
    cap = str(capture_path("05b_batch_index_ack.pcap"))
    for entry, batch in sorted(individually)[:3] + [(0, 1), (1, 3)]:
        res = run("follow", cap, "--message", f"0:{entry}:{batch}", "--json")
        assert res.returncode == 0, res.stderr
        [journey] = [json.loads(line) for line in res.stdout.splitlines()]
        acks = [f for f in journey["frames"] if f["type"] == "ACK"]
        types = {f["command"]["ack_type"] for f in acks}
        if (entry, batch) in individually:
            assert "Individual" in types
            for ack in acks:
                if ack["command"]["ack_type"] == "Individual":
                    [item] = [i for i in ack["command"]["message_id"] if i["entryId"] == entry]
                    assert not item["ack_set"][0] >> batch & 1  # a cleared bit is an acknowledged entry
        else:
            assert types == {"Cumulative"}
        assert [f["type"] for f in journey["frames"] if f["type"] != "ACK"] == ["SEND", "SEND_RECEIPT", "MESSAGE"]
        send = journey["frames"][0]
        sent = next(s for s in m["sent"] if (s["message_id"]["entry_id"], s["message_id"]["batch_index"])
                    == (entry, batch))
        assert send["messages"][batch]["payload_sha256"] == sent["payload_sha256"]


def test_follow_message_shows_the_journey_through_the_timeline():
    m = manifest("01_basic_nonbatched")
    msg = m["received"][3]["message_id"]
    cap = capture_path("01_basic_nonbatched.pcap")
    res = run("follow", str(cap), "--message", f"{msg['ledger_id']}:{msg['entry_id']}", "--plain")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    wire = _frames_carrying("01_basic_nonbatched.pcap", msg["ledger_id"], msg["entry_id"])
    shown = [int(line.split()[0]) for line in lines if line.split()[0].isdigit()]
    assert wire["SEND_RECEIPT"] | wire["MESSAGE"] | wire["ACK"] <= set(shown)
    # the frames' lines are the timeline's own lines for those frames
    timeline = {line.split()[0]: line for line in run(str(cap), "--plain").stdout.splitlines()}
    for line in lines:
        if line.split()[0].isdigit():
            assert timeline[line.split()[0]] == line
    assert lines[-1].lstrip().startswith("journey:")


@pytest.mark.parametrize("stem, producer, key", [("01_basic_nonbatched", "basic-producer", "seq"),
                                                  ("05b_batch_index_ack", "bidx-producer", "i")])
def test_a_producers_sequence_id_follows_the_message_the_client_was_given(stem, producer, key):
    """--producer P --sequence N is the journey of the message id send() returned for that message."""
    cap = str(capture_path(stem + ".pcap"))
    for sent in manifest(stem)["sent"][::7]:
        mid = sent["message_id"]
        batch = mid.get("batch_index", -1)
        ref = f"{mid['ledger_id']}:{mid['entry_id']}" + (f":{batch}" if batch >= 0 else "")
        by_sequence = run("follow", cap, "--producer", producer, "--sequence", str(sent[key]), "--json")
        by_id = run("follow", cap, "--message", ref, "--json")
        assert by_sequence.returncode == 0 and by_sequence.stdout == by_id.stdout != ""
        [journey] = [json.loads(line) for line in by_sequence.stdout.splitlines()]
        assert journey["journey"]["message_id"] == ref


@pytest.mark.parametrize("bad", ["x1", "1", "1:2:3:4", "a:b", "1:-2", ""])
def test_a_bad_message_id_is_one_line_and_exit_2(bad):
    res = run("follow", str(capture_path("01_basic_nonbatched.pcap")), "--message", bad)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("pulsar-dissect follow")
    assert res.stdout == ""


def test_a_message_not_in_the_capture_says_so():
    res = run("follow", str(capture_path("01_basic_nonbatched.pcap")), "--message", "999:999")
    assert res.returncode == 0 and res.stdout == "" and "999:999" in res.stderr


def test_report_refuses_an_unwritable_output_before_reading(tmp_path):
    res = run("report", str(capture_path("01_basic_nonbatched.pcap")), "-o", "/nonexistent/dir/r.html")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    missing = run("report", str(capture_path("01_basic_nonbatched.pcap")))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------ hostile strings
HTML_HOSTILE = "</script><script>alert(1)</script><img src=x onerror=alert(2)>&amp;\u2028"
HTML_TOPIC = "persistent://t/n/" + HTML_HOSTILE


@pytest.fixture(scope="module")
def hostile_capture(tmp_path_factory) -> Path:
    from test_hostile_output import _items

    md = fb.metadata(producer_name="p" + HTML_HOSTILE, properties=[{"key": "k<b>", "value": HTML_HOSTILE}])
    items = _items() + [
        ("c", fb.simple_frame("PRODUCER", topic=HTML_TOPIC, producer_id=7, request_id=7,
                              producer_name="p" + HTML_HOSTILE)),
        ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=7, producer_name="p" + HTML_HOSTILE)),
        ("c", fb.payload_frame("SEND", {"producer_id": 7, "sequence_id": 0}, md, HTML_HOSTILE.encode())),
        ("b", fb.simple_frame("SEND_RECEIPT", producer_id=7, sequence_id=0, message_id={"ledgerId": 5, "entryId": 0})),
        ("b", fb.simple_frame("ERROR", request_id=99, error=0, message="e" + HTML_HOSTILE)),
    ]
    path = tmp_path_factory.mktemp("hostile") / "hostile.pcap"
    fb.tcp_pcap(path, items)
    return path


def test_no_wire_string_can_end_the_data_element(hostile_capture, tmp_path):
    page, doc = build_report(hostile_capture, tmp_path / "h.html")
    data = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data and "\u2028" not in data
    assert HTML_TOPIC in doc["summary"]["topics"]  # the escape is lossless
    # only the page's own three script elements, and its one CSP
    assert page.count("<script") == 3 and page.count("</script>") == 3
    assert "default-src 'none'" in page


# ------------------------------------------------------------------------------------ in the browser
@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(ORACLE_MISSING + f"{CHROMIUM} (Debian's chromium; .ci/run installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(ORACLE_MISSING + "playwright (pip install 'pulsar-dissect[test]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


class Page:
    """A report opened in chromium, with every console message, page error and dialog recorded."""

    def __init__(self, browser, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.errors: list = []
        self.dialogs: list = []
        self.requests: list = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url) if not r.url.startswith(("file:", "data:"))
                     else None)
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("body[data-ready='1']", timeout=120_000)

    @classmethod
    def of(cls, browser, page_text: str, directory: Path) -> "Page":
        """The page of a report's text, written to a file in ``directory`` and opened."""
        path = directory / "r.html"
        path.write_text(page_text, encoding="utf-8")
        return cls(browser, path)

    def wait_until(self, condition, timeout: float = 30.0) -> None:
        """Poll from Python: the page's CSP forbids the string evaluation Playwright's wait_for_function uses."""
        import time

        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "the page never got there"
            self.page.wait_for_timeout(50)

    def tab(self, name: str) -> None:
        self.page.click(f"#tabs button[data-tab='{name}']")

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"))

    def clean(self) -> None:
        assert self.errors == [] and self.dialogs == [] and self.requests == []

    def close(self) -> None:
        self.page.close()


TABS = ["summary", "sequence", "timeline", "latency", "throughput", "journeys"]


@pytest.mark.parametrize("name", ["02_batching_props_keys.pcap", "11_errors.pcap", "09_shared.pcap",
                                  "tubemq/tubemq_consumer_broker.pcap"])
def test_the_page_loads_and_shows_the_stats_numbers(browser, reports, tmp_path, name):
    page_text, doc = reports[name]
    view = Page.of(browser, page_text, tmp_path)
    try:
        shown = view.page.eval_on_selector_all("[data-stat]", "els => els.map(e => [e.dataset.stat, e.textContent])")
        shown = {k: int(v.replace(",", "")) for k, v in shown}
        stats = stats_json(capture_path(name))
        assert shown["frames"] == stats["frames"]
        assert shown["connections"] == len(stats["connections"])
        assert shown["producers"] == len(stats["producers"]) and shown["consumers"] == len(stats["consumers"])
        assert {k[6:]: v for k, v in shown.items() if k.startswith("types.")} == stats["types"]
        assert {k[7:]: v for k, v in shown.items() if k.startswith("expert.")} == \
            {f"{e['id']}.{e['severity']}": e["count"] for e in stats["expert"]}
        assert {k[6:]: v for k, v in shown.items() if k.startswith("event.")} == stats["events"]
        assert {k: v for k, v in shown.items() if k.startswith("latency.")} == \
            {f"latency.{t}.count": v["count"] for t, v in stats["latency_ms"].items()}
        for p in stats["producers"]:
            assert shown[f"producer.{p['id']}@c{p['conn']}.messages"] == p["messages"]
        for c in stats["connections"]:
            assert shown[f"conn.{c['conn']}.frames_to_broker"] == c["frames_to_broker"]
        for c in stats.get("clients", ()):
            assert shown[f"client.{c['client_id']}.frames"] == c["frames"]
        for tab in TABS:
            view.tab(tab)
            view.page.wait_for_timeout(200)
            view.shot(f"{Path(name).stem}-{tab}")
        view.clean()
    finally:
        view.close()


@pytest.mark.parametrize("width", [800, 1400])
def test_connection_addresses_are_never_broken_across_lines(browser, reports, tmp_path, width):
    """An address cell may not wrap inside the address (it once showed `127.0.0.1:508` over `48`): the table
    grows a scroll bar instead, while wire strings in other cells may still break anywhere."""
    page_text, doc = reports["09_shared.pcap"]
    view = Page.of(browser, page_text, tmp_path)
    try:
        view.page.set_viewport_size({"width": width, "height": 900})
        view.page.wait_for_timeout(100)
        shown = view.page.eval_on_selector_all(
            "table.grid span.addr", "els => els.map(e => [e.textContent, e.getClientRects().length])")
        expected = [a for c in doc["summary"]["connections"] for a in (c["client"], c["broker"])]
        assert [text for text, _ in shown] == expected
        assert all(lines == 1 for _, lines in shown), shown
        view.clean()
    finally:
        view.close()


def test_a_filter_click_narrows_the_table(browser, reports, tmp_path):
    page_text, doc = reports["11_errors.pcap"]
    view = Page.of(browser, page_text, tmp_path)
    try:
        view.tab("timeline")
        count = lambda: int(view.page.get_attribute("#table-count", "data-shown"))  # noqa: E731
        assert count() == len(doc["table"]["rows"])
        view.page.click("#f-quick button[data-type='SUBSCRIBE']")
        stats = stats_json(capture_path("11_errors.pcap"))
        assert count() == stats["types"]["SUBSCRIBE"] < len(doc["table"]["rows"])
        types = view.page.eval_on_selector_all("#table-rows .trow .c-type", "els => els.map(e => e.textContent)")
        assert types and set(types) == {"SUBSCRIBE"}
        view.page.click("#f-quick button[data-type='SUBSCRIBE']")  # off again
        view.page.check("#f-problems")
        with_problems = [r for r in decoded("11_errors.pcap") if ("index" in r and r["problems"])
                         or ("index" not in r and r.get("severity") in ("warning", "error"))]
        assert count() == len(with_problems)
        view.page.uncheck("#f-problems")
        view.page.fill("#f-text", "topic has no messages")
        view.wait_until(lambda: count() != len(doc["table"]["rows"]))
        assert count() == sum(1 for r in decoded("11_errors.pcap") if r.get("type") == "ERROR"
                              and "Topic has no messages" in str(r.get("command")))
        view.page.click("#table-rows .trow")
        assert "Topic has no messages" in view.page.text_content("#detail-body")
        view.shot("11_errors-filtered")
        view.clean()
    finally:
        view.close()


def test_a_journey_shows_its_frames(browser, reports, tmp_path):
    m = manifest("01_basic_nonbatched")
    mid = m["received"][4]["message_id"]
    page_text, _ = reports["01_basic_nonbatched.pcap"]
    view = Page.of(browser, page_text, tmp_path)
    try:
        view.tab("journeys")
        view.page.fill("#jr-search", f"{mid['ledger_id']}:{mid['entry_id']}")
        view.wait_until(lambda: len(view.page.query_selector_all("#jr-list tr[data-journey]")) == 1)
        view.page.click("#jr-list tr[data-journey]")
        shown = [int(i) for i in view.page.eval_on_selector_all("#jr-frames .trow", "els => els.map(e => e.dataset.index)")]
        wire = _frames_carrying("01_basic_nonbatched.pcap", mid["ledger_id"], mid["entry_id"])
        payload = next(s["payload_sha256"] for s in m["sent"] if s["message_id"]["entry_id"] == mid["entry_id"])
        sends = {r["index"] for r in decoded("01_basic_nonbatched.pcap") if r.get("type") == "SEND"
                 and r["messages"][0]["payload_sha256"] == payload}
        assert set(shown) == sends | wire["SEND_RECEIPT"] | wire["MESSAGE"] | wire["ACK"]
        assert len(sends) == 1 and len(wire["ACK"]) == 1
        view.shot("01_basic-journey")
        view.clean()
    finally:
        view.close()


def test_hostile_strings_render_as_text(browser, hostile_capture, tmp_path):
    path = tmp_path / "hostile.html"
    _, doc = build_report(hostile_capture, path)
    view = Page(browser, path)
    try:
        assert view.page.eval_on_selector_all("img", "els => els.length") == 0
        assert view.page.eval_on_selector_all("script", "els => els.length") == 3
        # markup as text; the line separator (and the terminal escapes of _items) shown as escapes
        assert HTML_TOPIC.replace("\u2028", "\\u2028") in view.page.inner_text("#tab-summary")
        assert "\\x1b[31mRED" in view.page.inner_text("#tab-summary")
        assert not any(c in view.page.inner_text("body") for c in "\x1b\x07\x85\u202e\u2066\u2028")
        view.tab("timeline")
        view.page.fill("#f-text", "onerror")
        view.wait_until(lambda: view.page.get_attribute("#table-count", "data-shown")
                        not in ("0", str(len(doc["table"]["rows"]))))
        view.page.click("#table-rows .trow")
        assert "<img src=x onerror=alert(2)>" in view.page.text_content("#detail-body")
        for tab in TABS:
            view.tab(tab)
            view.page.wait_for_timeout(100)
        view.tab("summary")
        view.shot("hostile-summary")
        view.clean()
        assert view.page.evaluate("typeof window.alert") == "function"  # the page never replaced or called it
    finally:
        view.close()


@pytest.fixture(scope="module")
def many_frames(tmp_path_factory) -> Path:
    """100,000 frames on one connection: SEND bursts, their receipts, deliveries and acks."""
    items = [("c", fb.simple_frame("PRODUCER", topic="persistent://t/n/big", producer_id=1, request_id=1,
                                   producer_name="big")),
             ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="big")),
             ("c", fb.simple_frame("SUBSCRIBE", topic="persistent://t/n/big", subscription="s", consumer_id=2,
                                   request_id=2, subType=0, consumer_name="reader")),
             ("b", fb.simple_frame("SUCCESS", request_id=2))]
    burst = 500
    for start in range(0, 24_999, burst):
        seqs = range(start, min(start + burst, 24_999))
        items += [("c", fb.send_frame(b"m", producer_id=1, sequence_id=s, md=fb.metadata("big", s))) for s in seqs]
        items += [("b", fb.simple_frame("SEND_RECEIPT", producer_id=1, sequence_id=s,
                                        message_id={"ledgerId": 1, "entryId": s})) for s in seqs]
        items += [("b", fb.message_frame(b"m", consumer_id=2, ledger_id=1, entry_id=s, md=fb.metadata("big", s)))
                  for s in seqs]
        items += [("c", fb.simple_frame("ACK", consumer_id=2, ack_type=0,
                                        message_id=[{"ledgerId": 1, "entryId": s}])) for s in seqs]
    path = tmp_path_factory.mktemp("big") / "many.pcap"
    fb.tcp_pcap(path, items, segment_size=60_000, step=0.0001)
    return path


def test_a_report_of_100000_frames_loads_and_draws(browser, many_frames, tmp_path):
    path = tmp_path / "many.html"
    _, doc = build_report(many_frames, path)
    assert doc["table"]["frames"] >= 100_000 and doc["table"]["omitted"] == doc["table"]["records"] - 100_000
    view = Page(browser, path)
    try:
        assert int(view.page.get_attribute("#cut-notice", "data-omitted")) == doc["table"]["omitted"]
        view.tab("sequence")
        arrows = int(view.page.get_attribute("#seq-count", "data-arrows"))
        assert 0 < arrows < 100_000  # runs of one command collapsed
        view.page.uncheck("#seq-collapse")
        assert int(view.page.get_attribute("#seq-count", "data-arrows")) == 100_000 - \
            sum(1 for r in doc["table"]["rows"] if r[0] is None)
        times = [r[1] for r in doc["table"]["rows"] if r[0] is not None]
        start, end = times[len(times) * 2 // 5], times[len(times) // 2]
        view.page.fill("#seq-from", repr(start))
        view.page.fill("#seq-to", repr(end))
        view.page.dispatch_event("#seq-to", "change")
        zoomed = int(view.page.get_attribute("#seq-count", "data-arrows"))
        assert zoomed == sum(1 for t in times if start <= t <= end) < len(times)
        view.page.evaluate("document.getElementById('seq-scroll').scrollTop = 1e9")
        view.page.wait_for_timeout(100)
        view.shot("many-sequence")
        view.tab("timeline")
        view.page.evaluate("document.getElementById('table-scroll').scrollTop = 1e9")
        view.page.wait_for_timeout(100)
        last = view.page.eval_on_selector_all("#table-rows .trow", "els => els.map(e => e.dataset.pos)")
        assert str(len(doc["table"]["rows"]) - 1) in last  # the last row is reachable
        view.tab("journeys")
        view.shot("many-journeys")
        view.clean()
    finally:
        view.close()


# ------------------------------------------------------------------------------------ pipeline --report
def test_pipeline_report_is_the_report_of_the_same_capture(reports, tmp_path):
    """The Spark pipeline's tables, merged back into capture order, give the report `report` gives: the same
    summary (so `stats --json`), rows, journeys and distributions."""
    pytest.importorskip("pyspark", reason=ORACLE_MISSING + "pyspark (pip install 'pulsar-dissect[spark]')")
    java = subprocess.run(["bash", "-c", "java -version 2>&1"], capture_output=True, text=True)
    if not re.search(r'version "(1[7-9]|[2-9][0-9])', java.stdout):
        pytest.skip(ORACLE_MISSING + "a Java runtime 17 or newer (apt-get install default-jre-headless)")
    name = "11_errors.pcap"
    out = tmp_path / "report.html"
    # one partition: 11_errors' SUBSCRIBE_HELD_AT_END events span connections (another connection's Exclusive
    # consumer), found only when their connections share a partition (docs/SPARK.md); several partitions are
    # held to the CLI in tests/test_spark_pipeline.py
    done = run("pipeline", str(capture_path(name)), "--out", str(tmp_path / "tables"), "--master", "local[2]",
               "--conf", "spark.sql.shuffle.partitions=2", "--partitions", "1", "--report", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    doc = embedded(out.read_text(encoding="utf-8"), "report-data")
    _, expected = reports[name]
    assert doc["summary"] == stats_json(capture_path(name))
    for key in ("table", "latency", "throughput", "journeys", "event_severity"):
        assert doc[key] == expected[key], key


EXPRESSIONS = {
    "11_errors.pcap": ['type == "SUBSCRIBE"', 'latency_ms > 0.05 and request_type in {"SUBSCRIBE", "PRODUCER", "LOOKUP"}',
                       '"server.error" in expert.id', 'topic matches "err-[0-9]+$" and not type == "LOOKUP"',
                       'severity == "warning" || problems', 'conn >= 10 && !(direction == "to_broker")',
                       "command.message contains 'no messages'", "answers", 'consumer.name and size < 90', 'consumer.name != null'],
    "05b_batch_index_ack.pcap": ['messages.properties.i == "13"', 'command.ack_type contains "Cumul"',
                                 'metadata.num_messages_in_batch >= 10 and type == "MESSAGE"',
                                 'command.message_id.ack_set', 'messages.batch_index > 8.5'],
}


@pytest.mark.parametrize("name", EXPRESSIONS)
def test_the_pages_expression_filter_selects_what_the_cli_selects(browser, reports, tmp_path, name):
    """The expression language typed in the page keeps the records `-Y` keeps (its own evaluator, in JS)."""
    page_text, doc = reports[name]
    view = Page.of(browser, page_text, tmp_path)
    try:
        view.tab("timeline")
        shown = lambda: int(view.page.get_attribute("#table-count", "data-shown"))  # noqa: E731
        for expression in EXPRESSIONS[name]:
            cli = run(str(capture_path(name)), "-Y", expression, "--json")
            assert cli.returncode == 0, cli.stderr
            expected = len(cli.stdout.splitlines())
            view.page.fill("#f-expr", expression)
            view.page.click("#f-expr-apply")
            assert view.page.text_content("#f-expr-error") == ""
            assert shown() == expected, expression
            # the expression does select (a string is never equal, nor unequal, to null: none, in both)
            assert expected < len(doc["table"]["rows"]) and (expected > 0) != ("!= null" in expression)
        view.page.fill("#f-expr", "no_such_field == 1")
        view.page.click("#f-expr-apply")
        assert "no_such_field" in view.page.text_content("#f-expr-error")
        view.page.fill("#f-expr", "")
        view.page.click("#f-expr-apply")
        assert shown() == len(doc["table"]["rows"])
        view.clean()
    finally:
        view.close()


# ------------------------------------------------------------------------------------ the pieces, alone
def test_embedded_json_escapes_what_could_end_the_element_and_reads_back_the_same():
    from dissector.output.report import embedded_json

    value = {"t": "</script><!--<script>&\u2028\u2029'\"", "n": [1, 2.5, None]}
    data = embedded_json(value)
    assert not any(c in data for c in (b"<", b">", b"&", "\u2028".encode(), "\u2029".encode()))
    assert json.loads(data) == value


def test_the_detail_budget_keeps_rows_and_drops_only_their_fields():
    from dissector.options import Options
    from dissector.output.report import ReportBuilder
    from dissector.run import analysed_records

    builder = ReportBuilder(Options(), detail_budget=20_000)
    for rec in analysed_records(capture_path("02_batching_props_keys.pcap")):
        builder.add(rec)
    doc = builder.document(capture="x")
    details = json.loads(b"[" + bytes(builder.details).rstrip(b",") + b"]")
    assert len(details) == len(builder.table_rows()) == doc["table"]["kept"] == doc["table"]["records"]
    dropped = [i for i, d in enumerate(details) if d is None]
    assert dropped and doc["table"]["details_dropped"] == len(dropped)
    kept = [d for d in details if d is not None]
    assert len(b"".join(json.dumps(d).encode() for d in kept)) <= 20_000 * 1.1  # the budget, as JSON


@pytest.mark.parametrize("ack_set, size, acked", [([1022], 10, {0}), ([1018], 10, {0, 2}), ([0], 3, {0, 1, 2}),
                                                  ([], 10, None), (None, 10, None), ([2**64 - 1, 0], 66, {64, 65})])
def test_an_ack_set_acknowledges_the_entries_whose_bits_are_cleared(ack_set, size, acked):
    from dissector.analysis.journeys import acked_batch_indexes

    assert acked_batch_indexes(ack_set, size) == acked


def test_latency_bins_are_log_spaced_and_every_value_falls_in_its_bin():
    from dissector.analysis.journeys import BIN_EDGES_MS, bin_of

    for ms in (0.0009, 0.001, 0.0011, 0.5, 1.0, 3.3, 999.9, 10 ** 6 - 1, 10 ** 7):
        b = bin_of(ms)
        low = BIN_EDGES_MS[b - 1] if b > 0 else 0.0
        high = BIN_EDGES_MS[b] if b < len(BIN_EDGES_MS) else float("inf")
        assert low <= ms < high or (b == len(BIN_EDGES_MS) and ms >= BIN_EDGES_MS[-1]), ms


def test_a_redelivery_storm_keeps_a_journey_bounded():
    """One entry delivered and acked far more often than a journey keeps: the milestones beyond the cap are
    counted, not kept (the report's memory must not grow with a storm of redeliveries)."""
    from dissector.analysis import journeys

    cap = journeys.MAX_MILESTONES_PER_JOURNEY
    storm = cap * 2 + 7
    finished = []
    tracker = journeys.JourneyTracker(on_finish=finished.append)
    consumer = {"name": "c", "topic": "t", "subscription": "s"}
    for i in range(storm):
        tracker.add({"index": 2 * i, "time": float(i), "conn": 1, "type": "MESSAGE", "protocol": "pulsar",
                     "command": {"consumer_id": 0, "message_id": {"ledgerId": 5, "entryId": 9},
                                 "redelivery_count": i},
                     "consumer": consumer})
        tracker.add({"index": 2 * i + 1, "time": i + 0.5, "conn": 1, "type": "ACK", "protocol": "pulsar",
                     "command": {"ack_type": "Individual", "message_id": [{"ledgerId": 5, "entryId": 9}]},
                     "acks": [2 * i]})
    tracker.finish()
    (journey,) = finished
    assert len(journey.deliveries) == cap and journey.deliveries_dropped == storm - cap
    assert len(journey.acks) == cap and journey.acks_dropped == storm - cap
    summary = journey.summary()
    assert summary["deliveries_dropped"] == storm - cap and len(summary["deliveries"]) == cap


def test_the_journeys_share_one_budget_of_milestones():
    """Many open journeys each delivered a few times: past the tracker's budget of deliveries and acks kept,
    the rest are counted (milestones_dropped) and the budget is given back as journeys close."""
    from dissector.analysis import journeys

    finished = []
    tracker = journeys.JourneyTracker(on_finish=finished.append, max_milestones=50)
    consumer = {"name": "c", "topic": "t", "subscription": "s"}
    index = 0
    for entry in range(40):
        for _ in range(2):
            tracker.add({"index": index, "time": float(index), "conn": 1, "type": "MESSAGE", "protocol": "pulsar",
                         "command": {"consumer_id": 0, "message_id": {"ledgerId": 1, "entryId": entry}},
                         "consumer": consumer})
            index += 1
    assert tracker.milestones == 50
    tracker.finish()
    kept = sum(len(j.deliveries or ()) for j in finished)
    assert kept == 50 and tracker.milestones_dropped == 80 - 50 and tracker.milestones == 0


def test_a_frames_problem_lines_are_one_table_cell_and_every_problem_counts(tmp_path):
    """rs_03 (pulsar-rs): frames with problems under them become one-line cells (a line break there showed as
    a literal \\x0a); the headline count is every error and warning, events' (UNACKED_AT_END...) included, as
    `problems` lists them."""
    capture = Path(__file__).resolve().parent.parent / "captures" / "pulsar_rs" / "rs_03_snappy.pcap"
    _, data = build_report(capture, tmp_path / "r.html", "--port", "16650")
    column = data["table"]["columns"].index("info")
    infos = [row[column] for row in data["table"]["rows"]]
    assert not [info for info in infos if "\n" in info]
    assert any("⚠" in info for info in infos)
    listed = run("problems", str(capture), "--port", "16650", "--json").stdout.splitlines()
    groups = [json.loads(line) for line in listed]
    expected = sum(g["count"] for g in groups if g["severity"] in ("error", "warning"))
    summary = data["summary"]
    shown = sum(e["count"] for e in summary["expert"] if e["severity"] != "note") + sum(
        n for kind, n in summary["events"].items() if data["event_severity"].get(kind) in ("error", "warning"))
    assert shown == expected > 0


def test_a_report_of_nothing_decoded_says_which_port_to_try(tmp_path):
    capture = Path(__file__).resolve().parent.parent / "captures" / "pulsar_rs" / "rs_03_snappy.pcap"
    _, data = build_report(capture, tmp_path / "r.html")
    assert data["summary"]["frames"] == 0
    assert "--port 16650" in data["notice"]


@pytest.mark.parametrize("name", ["05b_batch_index_ack.pcap", "09_shared.pcap", "11_errors.pcap"])
def test_each_journey_comes_back_with_its_send_receipt_deliveries_and_acks(name):
    """The engine's store hands back every journey once, oldest opened first, with what the records say joins
    it: the SEND its receipt answers, every MESSAGE of its (topic, ledger, entry), and each ACK of those."""
    from dissector.analysis import journeys
    from dissector.run import analysed_records

    recs = [r for r in analysed_records(capture_path(name)) if "index" in r]
    finished = []
    tracker = journeys.JourneyTracker(on_finish=finished.append)
    for rec in recs:
        tracker.add(rec)
    tracker.finish()
    keys = [(j.topic, j.ledger, j.entry) for j in finished]
    assert finished and len(set(keys)) == len(keys)
    by_key = {key: j for key, j in zip(keys, finished)}
    delivered: dict = {}
    for rec in recs:
        ids = journeys._wire_id((rec.get("command") or {}).get("message_id"))
        if rec["type"] == "MESSAGE" and ids:
            delivered.setdefault((rec["consumer"]["topic"], *ids), []).append(rec["index"])
        elif rec["type"] == "SEND_RECEIPT" and ids:
            journey = by_key[(rec["producer"]["topic"], *ids)]
            assert journey.receipt[0] == rec["index"] and journey.send[0] == rec["answers"]
    assert {key: [d[0] for d in j.deliveries or ()] for key, j in by_key.items() if j.deliveries} == delivered
    acked = {r["index"]: r for r in recs if r["type"] == "ACK"}
    for journey in finished:
        for ack in journey.acks or ():
            assert ack[4] in (acked[ack[0]].get("acks") or []) + (acked[ack[0]].get("discards") or [])
            assert ack[4] in [d[0] for d in journey.deliveries]
    assert any(j.acks for j in finished) == bool(acked)
    # the frame that opened each (a receipt, or a delivery), in the order they opened
    opened = [min(([j.receipt[0]] if j.receipt else []) + [d[0] for d in j.deliveries or ()]) for j in finished]
    assert opened == sorted(opened)


@pytest.mark.parametrize("ack_set, size", [([1022], 10), ([1018], 10), ([0], 3), ([2**64 - 1, 0], 66), ([5], None),
                                           ([-2], 4)])
def test_acked_entries_are_the_entries_an_ack_set_clears(ack_set, size):
    from dissector.analysis.journeys import AckedEntries, acked_batch_indexes

    words = tuple(w & (2**64 - 1) for w in ack_set)
    entries = AckedEntries(words, size or 64 * len(words))
    assert {i for i in range(-3, 200) if i in entries} == acked_batch_indexes(ack_set, size)
    assert "1" not in entries


def test_a_journey_closed_early_is_counted_and_a_later_frame_opens_it_again():
    """Past max_open the oldest journey opened is closed (closed_early), in the order they opened; a later frame
    of it starts a new journey."""
    from dissector.analysis import journeys

    finished = []
    tracker = journeys.JourneyTracker(on_finish=finished.append, max_open=2)
    consumer = {"name": "c", "topic": "t", "subscription": "s"}
    for index, entry in enumerate([1, 2, 3, 1, 4]):
        tracker.add({"index": index, "time": float(index), "conn": 1, "type": "MESSAGE", "protocol": "pulsar",
                     "command": {"consumer_id": 0, "message_id": {"ledgerId": 9, "entryId": entry}},
                     "consumer": consumer})
    assert tracker.closed_early == 3 and [j.entry for j in finished] == [1, 2, 3]
    tracker.finish()
    assert [(j.entry, [d[0] for d in j.deliveries]) for j in finished] == [(1, [0]), (2, [1]), (3, [2]), (1, [3]),
                                                                          (4, [4])]
