// pulsar-dissect report page. Vanilla JS, no network. Every string from the capture is untrusted: it reaches
// the page only through textContent (el() below) or canvas fillText, never through innerHTML.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  let DETAILS = null; // the full records, parsed on the first click (the largest part of the page)
  const COL = {};
  DATA.table.columns.forEach((name, i) => { COL[name] = i; });
  const ROWS = DATA.table.rows;
  const S = DATA.summary;

  // ------------------------------------------------------------------ helpers
  // Wire strings are shown, never interpreted: controls (C0, DEL, C1), bidi overrides and isolates and the
  // line separators become visible escapes (as the terminal's `safe` writes them), so a topic cannot hide or
  // reorder what is shown. Every text node and canvas label goes through it.
  const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
  function shown(text) {
    return String(text).replace(INVISIBLE, (c) => {
      const code = c.charCodeAt(0);
      return code < 0x100 ? "\\x" + code.toString(16).padStart(2, "0") : "\\u" + code.toString(16).padStart(4, "0");
    });
  }
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else if (k === "title") node.title = shown(v);
      else node[k] = v;
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.appendChild(typeof c === "object" ? c : document.createTextNode(shown(c)));
    }
    return node;
  }
  const fmt = (n, d = 3) => (n === null || n === undefined ? "–" : (typeof n === "number" && !Number.isInteger(n) ? n.toFixed(d) : String(n)));
  const count = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
  function table(headers, rows, numeric) {
    const t = el("table", { class: "grid" });
    const tr = el("tr");
    headers.forEach((h) => tr.appendChild(el("th", {}, h)));
    t.appendChild(tr);
    for (const r of rows) {
      const row = el("tr");
      r.forEach((cell, i) => {
        if (cell instanceof Node) row.appendChild(el("td", { class: numeric && numeric[i] ? "n" : "" }, cell));
        else row.appendChild(el("td", { class: numeric && numeric[i] ? "n" : "" }, cell === null || cell === undefined ? "–" : cell));
      });
      t.appendChild(row);
    }
    return t;
  }
  function stat(key, value) { // a number the tests compare with `stats --json`
    return el("span", { "data-stat": key }, count(value));
  }
  function canvasContext(canvas) {
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 800, h = canvas.clientHeight || canvas.height;
    if (canvas.width !== Math.round(w * ratio) || canvas.height !== Math.round(h * ratio)) {
      canvas.width = Math.round(w * ratio); canvas.height = Math.round(h * ratio);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = "12px system-ui, sans-serif";
    const fillText = ctx.fillText.bind(ctx);
    ctx.fillText = (text, x, y) => fillText(shown(text), x, y);
    return { ctx, w, h };
  }
  const PALETTE = ["#2f6fd6", "#e07b16", "#2a9d55", "#8e44ad", "#c0392b", "#16a2b8", "#7f8c8d", "#b8860b", "#d63384", "#4b5563"];
  const isError = (r) => r[COL.severity] === "error" || /ERROR/.test(r[COL.type]);

  // ------------------------------------------------------------------ header and tabs
  document.getElementById("capture-name").textContent = shown(DATA.capture);
  document.title = "pulsar-dissect report: " + shown(DATA.capture);
  const notes = document.getElementById("header-notes");
  notes.appendChild(el("div", { class: "muted" }, `generated ${DATA.generated_utc}; ${count(S.frames)} frames over ${fmt(S.duration_s, 3)} s` +
    (DATA.filter ? "; records selected at build time with -Y " : ""), DATA.filter ? el("span", { class: "mono" }, DATA.filter) : null));
  if (DATA.table.omitted > 0) {
    notes.appendChild(el("div", { class: "notice", id: "cut-notice", "data-omitted": String(DATA.table.omitted) },
      `The table and the sequence diagram hold the first ${count(DATA.table.kept)} of ${count(DATA.table.records)} records ` +
      `(--max-frames ${count(DATA.table.max_frames)}): ${count(DATA.table.omitted)} left out. The summary, latency, throughput and journey figures cover the whole capture.`));
  }
  if (DATA.table.details_dropped > 0) {
    notes.appendChild(el("div", { class: "notice" }, `The full fields of the last ${count(DATA.table.details_dropped)} rows were not kept (size budget); their rows are shown.`));
  }
  const tabs = document.querySelectorAll("#tabs button");
  const drawn = {};
  function showTab(name) {
    tabs.forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
    document.querySelectorAll(".tab").forEach((s) => s.classList.toggle("active", s.id === "tab-" + name));
    if (!drawn[name] && RENDER[name]) { drawn[name] = true; RENDER[name](); }
    if (REDRAW[name]) REDRAW[name]();
  }
  tabs.forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));

  // ------------------------------------------------------------------ detail pane
  const detail = document.getElementById("detail");
  document.getElementById("detail-close").addEventListener("click", () => { detail.hidden = true; });
  function tree(value, label) {
    if (value !== null && typeof value === "object") {
      const entries = Array.isArray(value) ? value.map((v, i) => [`[${i}]`, v]) : Object.entries(value);
      const d = el("details", { open: entries.length <= 30 });
      d.appendChild(el("summary", {}, el("span", { class: "k" }, label), Array.isArray(value) ? ` (${value.length})` : ""));
      const ul = el("ul");
      for (const [k, v] of entries) ul.appendChild(el("li", {}, tree(v, k)));
      if (!entries.length) ul.appendChild(el("li", { class: "muted" }, "(none)"));
      d.appendChild(ul);
      return d;
    }
    return el("span", {}, el("span", { class: "k" }, label + ": "), el("span", { class: "v" }, value === null ? "null" : String(value)));
  }
  function showDetail(rowPos) {
    if (DETAILS === null) DETAILS = JSON.parse(document.getElementById("report-details").textContent);
    const r = ROWS[rowPos];
    const rec = DETAILS[rowPos];
    const body = document.getElementById("detail-body");
    body.textContent = "";
    document.getElementById("detail-title").textContent = shown((r[COL.index] !== null ? `frame ${r[COL.index]}: ` : "event: ") + r[COL.type]);
    body.appendChild(el("div", { class: "muted" }, `+${fmt(r[COL.time], 6)} s, connection c${r[COL.conn] ?? "?"}`));
    if (rec && rec.messages_not_shown) body.appendChild(el("div", { class: "notice" }, `${rec.messages_not_shown} more batch entries not shown`));
    const ul = el("ul");
    if (rec) for (const [k, v] of Object.entries(rec)) ul.appendChild(el("li", {}, tree(v, k)));
    else ul.appendChild(el("li", {}, el("span", { class: "notice" }, "the full fields of this frame were not kept (size budget): "), r[COL.info]));
    body.appendChild(ul);
    detail.hidden = false;
  }
  const POS_OF_INDEX = new Map(); // frame index -> row position
  ROWS.forEach((r, i) => { if (r[COL.index] !== null) POS_OF_INDEX.set(r[COL.index], i); });

  // ------------------------------------------------------------------ summary
  function renderSummary() {
    const root = document.getElementById("tab-summary");
    if (DATA.notice) root.appendChild(el("p", { class: "notice", id: "page-notice" }, DATA.notice)); // why nothing was decoded
    // the frames' errors and warnings, and the events' (UNACKED_AT_END, UNANSWERED...): one count, as `problems` lists them
    const eventProblems = Object.entries(S.events || {}).filter(([kind]) => ["error", "warning"].includes((DATA.event_severity || {})[kind])).reduce((a, [, n]) => a + n, 0);
    const problemCount = (S.expert || []).filter((e) => e.severity !== "note").reduce((a, e) => a + e.count, 0) + eventProblems;
    const cards = el("div", { class: "cards" });
    const card = (label, key, value, bad) => cards.appendChild(el("div", { class: "card" + (bad ? " bad" : "") }, el("div", { class: "num" }, stat(key, value)), el("div", { class: "lbl" }, label)));
    card("frames", "frames", S.frames);
    card("connections", "connections", S.connections.length + (S.connections_dropped || 0));
    card("topics", "topics", Object.keys(S.topics).length);
    card("producers", "producers", S.producers.length);
    card("consumers", "consumers", S.consumers.length);
    card("errors and warnings", "problems", problemCount, problemCount > 0);
    card("message journeys", "journeys", DATA.journeys.total);
    root.appendChild(cards);

    root.appendChild(el("h2", {}, "Connections"));
    root.appendChild(table(["conn", "client", "broker", "client version", "server version", "protocol", "frames →broker", "frames →client", "bytes →broker", "bytes →client", "problems", "ended"],
      S.connections.map((c) => ["c" + c.conn, el("span", { class: "addr" }, c.client), el("span", { class: "addr" }, c.broker), c.client_version ?? "–", c.server_version ?? "–", c.protocol_version ?? "–",
        stat(`conn.${c.conn}.frames_to_broker`, c.frames_to_broker), stat(`conn.${c.conn}.frames_to_client`, c.frames_to_client),
        count(c.bytes_to_broker), count(c.bytes_to_client), stat(`conn.${c.conn}.problems`, c.problems),
        c.closed ? `${c.closed}${c.closed_by ? " by the " + c.closed_by : ""}` : "open at the end"]), [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0]));
    if (S.connections_dropped) root.appendChild(el("p", { class: "notice" }, `${count(S.connections_dropped)} more connections not listed (connection cap).`));

    root.appendChild(el("h2", {}, "Topics"));
    root.appendChild(table(["topic", "messages sent", "bytes sent", "messages received", "bytes received", "producers", "consumers"],
      Object.entries(S.topics).map(([t, v]) => [el("span", { class: "mono" }, t), stat(`topic.${t}.messages_sent`, v.messages_sent), count(v.bytes_sent),
        stat(`topic.${t}.messages_received`, v.messages_received), count(v.bytes_received), (v.producers || []).join(", "), (v.consumers || []).join(", ")]), [0, 1, 1, 1, 1, 0, 0]));

    root.appendChild(el("h2", {}, "Producers"));
    root.appendChild(table(["producer", "conn", "topic", "messages", "batches", "accepted", "rejected", "unanswered", "send latency p50 / p99 (ms)", "compression"],
      S.producers.map((p) => [p.name ?? `id ${p.id}`, "c" + p.conn, el("span", { class: "mono" }, p.topic ?? "–"), stat(`producer.${p.id}@c${p.conn}.messages`, p.messages), count(p.batches),
        count(p.messages_accepted), count(p.messages_rejected), count(p.messages_unanswered),
        p.send_latency_ms ? `${fmt(p.send_latency_ms.p50)} / ${fmt(p.send_latency_ms.p99)}` : "–",
        Object.keys(p.compression || {}).join(", ") || "none"]), [0, 0, 0, 1, 1, 1, 1, 1, 1, 0]));

    root.appendChild(el("h2", {}, "Consumers"));
    // "dropped unread": acknowledged with a validation_error, never handed to the application
    root.appendChild(table(["consumer", "conn", "topic", "subscription", "type", "messages", "distinct", "duplicates", "acked", "dropped unread", "unacked", "redelivered frames", "permits"],
      S.consumers.map((c) => [c.name ?? `id ${c.id}`, "c" + c.conn, el("span", { class: "mono" }, c.topic ?? "–"), c.subscription ?? "–", el("span", { class: "whole" }, c.type ?? "–"),
        stat(`consumer.${c.id}@c${c.conn}.messages`, c.messages), count(c.messages_distinct), count(c.messages_duplicate), count(c.messages_acked),
        count(c.messages_discarded ?? 0), count(c.messages_unacked), count(c.redelivered_frames), count(c.permits_granted)]), [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]));

    if (S.clients && S.clients.length) { // TubeMQ's clients, by client id
      root.appendChild(el("h2", {}, "TubeMQ clients"));
      root.appendChild(table(["client id", "group", "frames", "messages sent", "messages received", "topics", "errors"],
        S.clients.map((c) => [el("span", { class: "mono" }, c.client_id), c.group ?? "–", stat(`client.${c.client_id}.frames`, c.frames),
          count(c.messages_sent), count(c.messages_received), (c.topics || []).join(", "),
          Object.entries(c.errors || {}).map(([k, v]) => `${k} ×${v}`).join(", ") || "none"]), [0, 0, 1, 1, 1, 0, 0]));
      if (S.clients_dropped) root.appendChild(el("p", { class: "notice" }, `${count(S.clients_dropped)} more clients not listed.`));
    }

    root.appendChild(el("h2", {}, "Problems by id and severity"));
    const problems = (S.expert || []).map((e) => [el("span", { class: "mono" }, e.id), el("span", { class: "sev-" + e.severity }, e.severity), stat(`expert.${e.id}.${e.severity}`, e.count)]);
    for (const [kind, n] of Object.entries(S.events || {})) {
      const sev = (DATA.event_severity || {})[kind] || "note";
      problems.push([el("span", { class: "mono" }, kind), el("span", { class: "sev-" + sev }, sev + " (event)"), stat(`event.${kind}`, n)]);
    }
    root.appendChild(problems.length ? table(["id", "severity", "count"], problems, [0, 0, 1]) : el("p", { class: "muted" }, "none"));
    if (Object.keys(S.server_errors || {}).length) {
      root.appendChild(el("h2", {}, "Errors the broker answered"));
      root.appendChild(table(["error", "count"], Object.entries(S.server_errors).map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : count(v)]), [0, 1]));
    }

    root.appendChild(el("h2", {}, "Frames by command"));
    root.appendChild(table(["command", "frames"], Object.entries(S.types).map(([t, n]) => [t, stat(`types.${t}`, n)]), [0, 1]));

    root.appendChild(el("h2", {}, "Request latency (ms)"));
    root.appendChild(table(["request", "count", "p50", "p90", "p99", "max", "mean"],
      Object.entries(S.latency_ms).map(([t, l]) => [t, stat(`latency.${t}.count`, l.count), fmt(l.p50), fmt(l.p90), fmt(l.p99), fmt(l.max), fmt(l.mean)]), [0, 1, 1, 1, 1, 1, 1]));
  }

  // ------------------------------------------------------------------ the expression language (-Y), in the page
  // The grammar and semantics of dissector/output/expr.py, over the records kept for the detail pane: a path
  // through a list collects every element's values and a comparison holds when any matches; a field a record
  // lacks makes a comparison false; strings compare with strings, numbers with numbers, booleans with booleans.
  const KNOWN_FIELDS = new Set(DATA.expression_fields || []);
  class ExprError extends Error { constructor(message, column) { super(message + (column ? ` at column ${column}` : "")); } }
  function tokenize(text) {
    const tokens = [];
    const spec = [["ws", /^\s+/], ["string", /^"(?:[^"\\]|\\.)*"/], ["squote", /^'[^']*'/],
      ["number", /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/], ["op", /^(?:==|!=|<=|>=|<|>|&&|\|\||!|~|\(|\)|\{|\}|,|\.)/],
      ["name", /^[A-Za-z_][A-Za-z0-9_]*/]];
    let pos = 0;
    while (pos < text.length) {
      const rest = text.slice(pos);
      const hit = spec.find(([, re]) => re.test(rest));
      if (!hit) throw new ExprError(`syntax error: unexpected character '${rest[0]}'`, pos + 1);
      const value = rest.match(hit[1])[0];
      if (hit[0] !== "ws") tokens.push({ kind: hit[0], value, column: pos + 1 });
      pos += value.length;
    }
    tokens.push({ kind: "end", value: "", column: text.length + 1 });
    return tokens;
  }
  const KEYWORDS = new Set(["and", "or", "not", "in", "matches", "contains", "true", "false", "null"]);
  function compileExpr(text) {
    const tokens = tokenize(text);
    let i = 0;
    const peek = () => tokens[i];
    const isWord = (w) => tokens[i].kind === "name" && tokens[i].value === w;
    const isOp = (o) => tokens[i].kind === "op" && tokens[i].value === o;
    const fail = () => { const t = tokens[i]; throw new ExprError(t.kind === "end" ? "syntax error: the expression ends too soon" : `syntax error: unexpected '${t.value}'`, t.column); };
    function orExpr() { let parts = [andExpr()]; while (isWord("or") || isOp("||")) { i++; parts.push(andExpr()); } return parts.length === 1 ? parts[0] : (r) => parts.some((p) => p(r)); }
    function andExpr() { let parts = [notExpr()]; while (isWord("and") || isOp("&&")) { i++; parts.push(notExpr()); } return parts.length === 1 ? parts[0] : (r) => parts.every((p) => p(r)); }
    function notExpr() { if (isWord("not") || isOp("!")) { i++; const inner = notExpr(); return (r) => !inner(r); } return atom(); }
    function literal() {
      const t = peek();
      if (t.kind === "string") { i++; try { return { literal: JSON.parse(t.value), column: t.column }; } catch (e) { throw new ExprError(`bad string ${t.value}`, t.column); } }
      if (t.kind === "squote") { i++; return { literal: t.value.slice(1, -1), column: t.column }; }
      if (t.kind === "number") { i++; return { literal: Number(t.value) }; }
      if (isWord("true")) { i++; return { literal: true }; }
      if (isWord("false")) { i++; return { literal: false }; }
      if (isWord("null")) { i++; return { literal: null }; }
      return null;
    }
    function field() {
      const t = peek();
      if (t.kind !== "name" || KEYWORDS.has(t.value)) return null;
      if (!KNOWN_FIELDS.has(t.value)) throw new ExprError(`unknown field '${t.value}'`, t.column);
      const path = [t.value]; i++;
      while (isOp(".")) { i++; const n = peek(); if (n.kind !== "name" || KEYWORDS.has(n.value)) fail(); path.push(n.value); i++; }
      return { path };
    }
    function operand() { const v = field() || literal(); if (!v) fail(); return v; }
    function atom() {
      if (isOp("(")) { i++; const inner = orExpr(); if (!isOp(")")) fail(); i++; return inner; }
      const left = operand();
      const t = peek();
      if (t.kind === "op" && ["==", "!=", "<", "<=", ">", ">="].includes(t.value)) {
        i++; const right = operand(); const op = t.value;
        const ok = op === "==" || op === "!=" ? comparable : orderable;
        return (r) => values(left, r).some((a) => values(right, r).some((b) => ok(a, b) && OPS[op](a, b)));
      }
      if (isWord("in")) {
        i++;
        if (isOp("{")) {
          i++; const items = [];
          if (!isOp("}")) { for (;;) { const l = literal(); if (!l) fail(); items.push(l.literal); if (isOp(",")) { i++; continue; } break; } }
          if (!isOp("}")) fail(); i++;
          return (r) => values(left, r).some((a) => items.some((b) => comparable(a, b) && same(a, b)));
        }
        const right = field(); if (!right) fail();
        return (r) => { const c = values(right, r); return values(left, r).some((a) => c.some((b) => comparable(a, b) && same(a, b))); };
      }
      if (isWord("matches") || isOp("~")) {
        i++; const p = literal(); if (!p || typeof p.literal !== "string") fail();
        let re; try { re = new RegExp(p.literal); } catch (e) { throw new ExprError(`bad regular expression '${p.literal}'`, p.column); }
        return (r) => values(left, r).some((a) => typeof a === "string" && re.test(a));
      }
      if (isWord("contains")) {
        i++; const right = operand();
        return (r) => values(left, r).some((a) => values(right, r).some((b) => (typeof a === "string" && typeof b === "string" && a.includes(b)) || (comparable(a, b) && same(a, b))));
      }
      if (!left.path) fail();
      return (r) => values(left, r).some((v) => !(v === null || v === false || v === 0 || v === "" || (Array.isArray(v) && !v.length) || (isObject(v) && !Object.keys(v).length)));
    }
    const predicate = orExpr();
    if (peek().kind !== "end") fail();
    return predicate;
  }
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const kind = (v) => (v === null ? "null" : Array.isArray(v) ? "list" : typeof v);
  const comparable = (a, b) => kind(a) === kind(b);
  const orderable = (a, b) => (typeof a === "number" && typeof b === "number") || (typeof a === "string" && typeof b === "string");
  const same = (a, b) => (typeof a === "object" && a !== null ? JSON.stringify(a) === JSON.stringify(b) : a === b);
  const OPS = { "==": same, "!=": (a, b) => !same(a, b), "<": (a, b) => a < b, "<=": (a, b) => a <= b, ">": (a, b) => a > b, ">=": (a, b) => a >= b };
  function topicOf(rec) {
    if (isObject(rec.command) && "topic" in rec.command) return rec.command.topic;
    for (const key of ["producer", "consumer"]) if (isObject(rec[key]) && rec[key].topic !== null && rec[key].topic !== undefined) return rec[key].topic;
    return null;
  }
  function values(operand, rec) {
    if (!operand.path) return [operand.literal];
    let path = operand.path, found;
    if (path[0] === "topic" && !("topic" in rec)) {
      const t = topicOf(rec); found = t === null ? [] : [t]; path = path.slice(1);
      if (!path.length) return found;
    } else found = [rec];
    for (const part of path) {
      const next = [];
      for (const v of found) {
        if (!isObject(v) || !(part in v)) continue;
        const item = v[part];
        if (Array.isArray(item)) next.push(...item); else next.push(item);
      }
      found = next;
      if (!found.length) break;
    }
    return found;
  }

  // ------------------------------------------------------------------ timeline table (virtual scrolling)
  const ROW_H = 22;
  let visible = ROWS.map((_, i) => i);
  let selectedPos = -1;
  const tableScroll = document.getElementById("table-scroll");
  const tableRows = document.getElementById("table-rows");
  const tableSpacer = document.getElementById("table-spacer");
  const filters = { type: "", topic: "", actor: "", problems: false, text: "", expr: null };

  function renderTimeline() {
    const types = new Map(), topics = new Map(), actors = new Map();
    for (const r of ROWS) {
      types.set(r[COL.type], (types.get(r[COL.type]) || 0) + 1);
      if (r[COL.topic]) topics.set(r[COL.topic], (topics.get(r[COL.topic]) || 0) + 1);
      if (r[COL.actor]) actors.set(r[COL.actor], (actors.get(r[COL.actor]) || 0) + 1);
    }
    const fill = (id, map) => {
      const sel = document.getElementById(id);
      [...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, 2000).forEach(([v, n]) => sel.appendChild(el("option", { value: v }, `${v} (${n})`)));
    };
    fill("f-type", types); fill("f-topic", topics); fill("f-actor", actors);
    const quick = document.getElementById("f-quick");
    [...types.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12).forEach(([t]) => {
      quick.appendChild(el("button", { "data-type": t, onclick: () => { filters.type = filters.type === t ? "" : t; document.getElementById("f-type").value = filters.type; applyFilters(); } }, t));
    });
    document.getElementById("f-type").addEventListener("change", (e) => { filters.type = e.target.value; applyFilters(); });
    document.getElementById("f-topic").addEventListener("change", (e) => { filters.topic = e.target.value; applyFilters(); });
    document.getElementById("f-actor").addEventListener("change", (e) => { filters.actor = e.target.value; applyFilters(); });
    document.getElementById("f-problems").addEventListener("change", (e) => { filters.problems = e.target.checked; applyFilters(); });
    let timer = null;
    document.getElementById("f-text").addEventListener("input", (e) => { clearTimeout(timer); timer = setTimeout(() => { filters.text = e.target.value.toLowerCase(); applyFilters(); }, 150); });
    const exprInput = document.getElementById("f-expr");
    const exprError = document.getElementById("f-expr-error");
    const applyExpr = () => {
      exprError.textContent = "";
      const text = exprInput.value.trim();
      if (!text) { filters.expr = null; applyFilters(); return; }
      try { filters.expr = compileExpr(text); } catch (e) { exprError.textContent = e.message; return; }
      if (DETAILS === null) DETAILS = JSON.parse(document.getElementById("report-details").textContent);
      applyFilters();
    };
    exprInput.addEventListener("keydown", (e) => { if (e.key === "Enter") applyExpr(); });
    document.getElementById("f-expr-apply").addEventListener("click", applyExpr);
    tableScroll.addEventListener("scroll", drawTable);
    window.addEventListener("resize", drawTable);
    applyFilters();
  }
  function applyFilters() {
    const f = filters;
    visible = [];
    let unevaluated = 0;
    for (let i = 0; i < ROWS.length; i++) {
      const r = ROWS[i];
      if (f.expr) {
        const rec = DETAILS[i];
        if (!rec) { unevaluated++; continue; } // its fields were not kept (size budget)
        if (!f.expr(rec)) continue;
      }
      if (f.type && r[COL.type] !== f.type) continue;
      if (f.topic && r[COL.topic] !== f.topic) continue;
      if (f.actor && r[COL.actor] !== f.actor) continue;
      if (f.problems && !(r[COL.problems] > 0)) continue;
      if (f.text) {
        const hay = `${r[COL.type]} ${r[COL.info]} ${r[COL.topic] || ""} ${r[COL.actor] || ""} ${(r[COL.expert] || []).join(" ")}`.toLowerCase();
        if (!hay.includes(f.text)) continue;
      }
      visible.push(i);
    }
    document.querySelectorAll("#f-quick button").forEach((b) => b.classList.toggle("on", b.dataset.type === f.type));
    const counter = document.getElementById("table-count");
    counter.textContent = `${count(visible.length)} of ${count(ROWS.length)} rows` + (unevaluated ? ` (${count(unevaluated)} rows without their fields not tested by the expression)` : "");
    counter.dataset.shown = String(visible.length);
    tableSpacer.style.height = visible.length * ROW_H + "px";
    tableScroll.scrollTop = 0;
    drawTable();
  }
  function drawTable() {
    const first = Math.max(0, Math.floor(tableScroll.scrollTop / ROW_H) - 5);
    const last = Math.min(visible.length, first + Math.ceil((tableScroll.clientHeight || 600) / ROW_H) + 10);
    tableRows.style.top = first * ROW_H + "px";
    tableRows.textContent = "";
    for (let k = first; k < last; k++) {
      const pos = visible[k], r = ROWS[pos];
      const cls = ["trow", r[COL.index] === null ? "event" : "", r[COL.severity] === "error" || /ERROR/.test(r[COL.type]) ? "error" : (r[COL.severity] === "warning" ? "warning" : ""), pos === selectedPos ? "sel" : ""].join(" ");
      const dir = r[COL.direction] === "to_broker" ? "→" : (r[COL.direction] === "to_client" ? "←" : "");
      const row = el("div", { class: cls, "data-pos": String(pos), "data-index": r[COL.index] === null ? "" : String(r[COL.index]) },
        el("span", { class: "c-index" }, r[COL.index] === null ? "-" : r[COL.index]), el("span", { class: "c-time" }, fmt(r[COL.time], 6)),
        el("span", { class: "c-conn" }, r[COL.conn] === null || r[COL.conn] === undefined ? "" : "c" + r[COL.conn]), el("span", { class: "c-dir" }, dir),
        el("span", { class: "c-type" }, r[COL.type]), el("span", { class: "c-info", title: r[COL.info] }, r[COL.info]));
      row.addEventListener("click", () => { selectedPos = pos; drawTable(); showDetail(pos); });
      tableRows.appendChild(row);
    }
  }

  // ------------------------------------------------------------------ sequence diagram (virtual: visible rows only)
  const SEQ_H = 26;
  const seq = { conn: null, items: [], range: null, connRange: [0, 0] };
  const byConn = new Map();
  ROWS.forEach((r, i) => { if (r[COL.index] !== null && r[COL.conn] !== null) { if (!byConn.has(r[COL.conn])) byConn.set(r[COL.conn], []); byConn.get(r[COL.conn]).push(i); } });
  const seqScroll = document.getElementById("seq-scroll");
  const seqCanvas = document.getElementById("seq-canvas");
  const seqSpacer = document.getElementById("seq-spacer");
  function renderSequence() {
    const sel = document.getElementById("seq-conn");
    const connInfo = new Map(S.connections.map((c) => [c.conn, c]));
    [...byConn.keys()].sort((a, b) => a - b).forEach((c) => {
      const info = connInfo.get(c);
      sel.appendChild(el("option", { value: String(c) }, `c${c}` + (info ? ` ${info.client} ↔ ${info.broker}` : "") + ` (${count(byConn.get(c).length)} frames)`));
    });
    sel.addEventListener("change", () => selectConn(Number(sel.value)));
    document.getElementById("seq-collapse").addEventListener("change", buildSeq);
    document.getElementById("seq-reset").addEventListener("click", () => { seq.range = null; buildSeq(); });
    for (const id of ["seq-from", "seq-to"]) document.getElementById(id).addEventListener("change", () => {
      const a = parseFloat(document.getElementById("seq-from").value), b = parseFloat(document.getElementById("seq-to").value);
      seq.range = [isNaN(a) ? seq.connRange[0] : a, isNaN(b) ? seq.connRange[1] : b]; buildSeq();
    });
    seqScroll.addEventListener("scroll", drawSeq);
    window.addEventListener("resize", () => { drawOverview(); drawSeq(); });
    seqCanvas.addEventListener("click", (e) => {
      const rect = seqCanvas.getBoundingClientRect();
      const k = Math.floor((e.clientY - rect.top - 20 + seqScroll.scrollTop) / SEQ_H);
      const item = seq.items[k];
      if (item) showDetail(item.pos);
    });
    setupBrush();
    if (byConn.size) selectConn(Number(sel.value));
  }
  function selectConn(c) {
    seq.conn = c;
    const list = byConn.get(c) || [];
    seq.connRange = list.length ? [ROWS[list[0]][COL.time], ROWS[list[list.length - 1]][COL.time]] : [0, 0];
    seq.range = null;
    buildSeq();
  }
  function buildSeq() {
    const list = byConn.get(seq.conn) || [];
    const [from, to] = seq.range || seq.connRange;
    document.getElementById("seq-from").value = String(from);
    document.getElementById("seq-to").value = String(to);
    const collapse = document.getElementById("seq-collapse").checked;
    // a run of the same command the same way, without problems, is one arrow (requests and responses too:
    // a run of responses shows the range of its latencies; a single response is joined to its request)
    const items = [];
    seq.rowOf = new Map();
    for (const pos of list) {
      const r = ROWS[pos], t = r[COL.time];
      if (t < from || t > to) continue;
      const prev = items[items.length - 1];
      const plain = !(r[COL.problems] > 0) && !isError(r);
      const lat = r[COL.latency_ms];
      if (collapse && plain && prev && prev.plain && prev.type === r[COL.type] && prev.dir === r[COL.direction]) {
        prev.count += 1; prev.entries += r[COL.entries] || 1; prev.last = pos;
        if (lat !== null) { prev.latMin = Math.min(prev.latMin ?? lat, lat); prev.latMax = Math.max(prev.latMax ?? lat, lat); }
        seq.rowOf.set(r[COL.index], items.length - 1);
        continue;
      }
      items.push({ pos, last: pos, type: r[COL.type], dir: r[COL.direction], plain, count: 1, entries: r[COL.entries] || 1, latMin: lat, latMax: lat });
      seq.rowOf.set(r[COL.index], items.length - 1);
    }
    seq.items = items;
    // the canvas stays at the top of the scrolled box (sticky); the spacer gives the box its full height
    seqSpacer.style.height = Math.max(0, items.length * SEQ_H + 40 - (seqScroll.clientHeight || 500)) + "px";
    const counter = document.getElementById("seq-count");
    counter.textContent = `${count(items.length)} arrows for ${count(list.filter((p) => ROWS[p][COL.time] >= from && ROWS[p][COL.time] <= to).length)} frames`;
    counter.dataset.arrows = String(items.length);
    seqScroll.scrollTop = 0;
    drawOverview(); drawSeq();
  }
  function drawSeq() {
    const viewH = seqScroll.clientHeight || 500;
    seqCanvas.style.height = viewH + "px";
    const { ctx, w, h } = canvasContext(seqCanvas);
    const xc = Math.round(w * 0.22), xb = Math.round(w * 0.70), xl = Math.round(w * 0.78);
    const top = seqScroll.scrollTop;
    const first = Math.max(0, Math.floor(top / SEQ_H) - 1), last = Math.min(seq.items.length, first + Math.ceil(h / SEQ_H) + 2);
    const info = S.connections.find((c) => c.conn === seq.conn) || {};
    ctx.strokeStyle = "#98a2b3"; ctx.lineWidth = 1;
    for (const x of [xc, xb]) { ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, h); ctx.stroke(); }
    for (let k = first; k < last; k++) {
      const it = seq.items[k], r = ROWS[it.pos];
      const y = k * SEQ_H - top + 20 + SEQ_H / 2;
      const toBroker = it.dir !== "to_client";
      const x0 = toBroker ? xc : xb, x1 = toBroker ? xb : xc;
      const color = isError(r) ? "#c5221f" : (toBroker ? "#2f6fd6" : "#e07b16");
      ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = it.count > 1 ? 3 : 1.5;
      ctx.beginPath(); ctx.moveTo(x0, y); ctx.lineTo(x1, y); ctx.stroke();
      const dx = toBroker ? -8 : 8;
      ctx.beginPath(); ctx.moveTo(x1, y); ctx.lineTo(x1 + dx, y - 4); ctx.lineTo(x1 + dx, y + 4); ctx.closePath(); ctx.fill();
      let label = r[COL.type];
      if (it.count > 1) label += ` ×${count(it.count)} frames` + (it.entries > it.count ? `, ${count(it.entries)} entries` : "");
      else if (r[COL.entries]) label += ` [batch of ${count(r[COL.entries])}]`;
      ctx.textAlign = "left"; ctx.font = "600 12px system-ui, sans-serif";
      ctx.fillText(label, Math.min(x0, x1) + 12, y - 4);
      ctx.font = "11px ui-monospace, monospace"; ctx.fillStyle = "#667085";
      const right = it.count > 1 ? `#${r[COL.index]}–#${ROWS[it.last][COL.index]}` : `#${r[COL.index]}`;
      ctx.textAlign = "right"; ctx.fillText(`+${fmt(r[COL.time], 6)} s  ${right}`, xc - 8, y + 4);
      if (it.count === 1 && r[COL.info]) {
        ctx.textAlign = "left"; ctx.fillStyle = "#667085";
        const text = r[COL.info].length > 90 ? r[COL.info].slice(0, 90) + "…" : r[COL.info];
        ctx.save(); ctx.beginPath(); ctx.rect(Math.min(x0, x1) + 10, y, Math.abs(x1 - x0) - 20, SEQ_H / 2); ctx.clip();
        ctx.fillText(text, Math.min(x0, x1) + 12, y + 10); ctx.restore();
      }
      ctx.font = "12px system-ui, sans-serif";
      // a response: join it to its request with the latency (a run of responses: the range of latencies)
      const req = r[COL.answers] !== null && it.count === 1 ? seq.rowOf.get(r[COL.answers]) : undefined;
      if (it.count > 1 && it.latMin !== null && it.latMin !== undefined) {
        ctx.fillStyle = "#1d2330"; ctx.textAlign = "left";
        ctx.fillText(`${fmt(it.latMin)}–${fmt(it.latMax)} ms ${r[COL.request_type] || ""}`, xl + 34, y + 4);
      }
      if (req !== undefined) {
        const y0 = req * SEQ_H - top + 20 + SEQ_H / 2;
        const off = xl + 6 + (k % 4) * 6;
        ctx.strokeStyle = isError(r) ? "#c5221f" : "#7a869a"; ctx.lineWidth = 1;
        ctx.beginPath(); ctx.moveTo(xb + 2, y0); ctx.lineTo(off, y0); ctx.lineTo(off, y); ctx.lineTo(xb + 2, y); ctx.stroke();
        ctx.fillStyle = isError(r) ? "#c5221f" : "#1d2330"; ctx.textAlign = "left";
        ctx.fillText(`${fmt(r[COL.latency_ms])} ms ${r[COL.request_type] || ""}`, off + 28, y + 4);
      }
    }
    // the lifelines' heads, over the rows scrolled under them
    ctx.fillStyle = "#f6f7f9"; ctx.fillRect(0, 0, w, 20);
    ctx.fillStyle = "#1d2330"; ctx.textAlign = "center"; ctx.font = "600 12px system-ui, sans-serif";
    ctx.fillText("client " + (info.client || "") + (info.client_version ? " · " + info.client_version : ""), xc, 14);
    ctx.fillText("broker " + (info.broker || "") + (info.server_version ? " · " + info.server_version : ""), xb, 14);
    ctx.font = "12px system-ui, sans-serif";
  }
  // the overview strip: frames of the connection over its time; drag to zoom
  function drawOverview() {
    const c = document.getElementById("seq-overview");
    const { ctx, w, h } = canvasContext(c);
    const [a, b] = seq.connRange, span = Math.max(b - a, 1e-9);
    const list = byConn.get(seq.conn) || [];
    const bins = new Array(Math.max(1, Math.floor(w))).fill(0), errs = new Array(bins.length).fill(0);
    for (const pos of list) { const i = Math.min(bins.length - 1, Math.floor((ROWS[pos][COL.time] - a) / span * bins.length)); bins[i]++; if (isError(ROWS[pos])) errs[i]++; }
    const most = Math.max(1, ...bins);
    for (let i = 0; i < bins.length; i++) {
      if (!bins[i]) continue;
      const bh = Math.max(2, Math.log1p(bins[i]) / Math.log1p(most) * (h - 14));
      ctx.fillStyle = errs[i] ? "#c5221f" : "#2f6fd6"; ctx.fillRect(i, h - bh, 1, bh);
    }
    if (seq.range) {
      const x0 = (seq.range[0] - a) / span * w, x1 = (seq.range[1] - a) / span * w;
      ctx.fillStyle = "rgba(36,87,197,0.15)"; ctx.fillRect(x0, 0, Math.max(2, x1 - x0), h);
    }
    ctx.fillStyle = "#667085"; ctx.textAlign = "left"; ctx.fillText(`+${fmt(a, 3)} s`, 4, 11); ctx.textAlign = "right"; ctx.fillText(`+${fmt(b, 3)} s`, w - 4, 11);
  }
  function setupBrush() {
    const c = document.getElementById("seq-overview");
    let start = null;
    const timeAt = (e) => { const rect = c.getBoundingClientRect(); const f = Math.min(1, Math.max(0, (e.clientX - rect.left) / rect.width)); return seq.connRange[0] + f * (seq.connRange[1] - seq.connRange[0]); };
    c.addEventListener("mousedown", (e) => { start = timeAt(e); });
    c.addEventListener("mousemove", (e) => { if (start !== null) { const t = timeAt(e); seq.range = [Math.min(start, t), Math.max(start, t)]; drawOverview(); } });
    window.addEventListener("mouseup", (e) => {
      if (start === null) return;
      const t = timeAt(e); const a = Math.min(start, t), b = Math.max(start, t); start = null;
      const eps = (seq.connRange[1] - seq.connRange[0]) / 500;
      seq.range = b - a > eps ? [a, b] : null; buildSeq();
    });
  }

  // ------------------------------------------------------------------ charts
  function axes(ctx, w, h, pad, xmin, xmax, ymin, ymax, logY, xlabel, ylabel) {
    const X = (x) => pad.l + (x - xmin) / Math.max(xmax - xmin, 1e-12) * (w - pad.l - pad.r);
    const Y = logY ? (y) => h - pad.b - (Math.log10(y) - Math.log10(ymin)) / Math.max(Math.log10(ymax) - Math.log10(ymin), 1e-12) * (h - pad.t - pad.b)
      : (y) => h - pad.b - (y - ymin) / Math.max(ymax - ymin, 1e-12) * (h - pad.t - pad.b);
    ctx.strokeStyle = "#98a2b3"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(pad.l, pad.t); ctx.lineTo(pad.l, h - pad.b); ctx.lineTo(w - pad.r, h - pad.b); ctx.stroke();
    ctx.fillStyle = "#667085"; ctx.textAlign = "right";
    if (logY) {
      for (let e = Math.floor(Math.log10(ymin)); e <= Math.ceil(Math.log10(ymax)); e++) {
        const v = Math.pow(10, e); if (v < ymin || v > ymax) continue;
        const y = Y(v); ctx.fillText(v >= 1 ? String(v) : v.toPrecision(1), pad.l - 4, y + 4);
        ctx.strokeStyle = "#eef0f3"; ctx.beginPath(); ctx.moveTo(pad.l + 1, y); ctx.lineTo(w - pad.r, y); ctx.stroke();
      }
    } else {
      for (let i = 0; i <= 4; i++) { const v = ymin + (ymax - ymin) * i / 4; const y = Y(v); ctx.fillText(Number(v.toPrecision(3)).toLocaleString("en-US"), pad.l - 4, y + 4); ctx.strokeStyle = "#eef0f3"; ctx.beginPath(); ctx.moveTo(pad.l + 1, y); ctx.lineTo(w - pad.r, y); ctx.stroke(); }
    }
    ctx.textAlign = "center";
    const step = niceStep((xmax - xmin) / 6);
    for (let v = Math.ceil(xmin / step) * step; v <= xmax + step * 1e-9; v += step) ctx.fillText(Number(v.toFixed(9)).toString(), X(v), h - pad.b + 14);
    ctx.fillText(xlabel, (pad.l + w - pad.r) / 2, h - 4);
    ctx.save(); ctx.translate(12, (pad.t + h - pad.b) / 2); ctx.rotate(-Math.PI / 2); ctx.fillText(ylabel, 0, 0); ctx.restore();
    return { X, Y };
  }
  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-12))));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }
  const latencyTypes = Object.keys(DATA.latency.histograms);
  const colorOf = (t) => PALETTE[Math.max(0, latencyTypes.indexOf(t)) % PALETTE.length];
  function renderLatency() {
    const samples = DATA.latency.samples;
    document.getElementById("lat-note").textContent = samples.length ? `${count(samples.length)} responses plotted (a bounded sample when there are more); errors as ×. Histogram counts cover every response.` : "No request was answered in this capture.";
    const legend = document.getElementById("lat-legend");
    latencyTypes.forEach((t) => legend.appendChild(el("span", {}, el("span", { class: "sw" }), t)));
    legend.querySelectorAll(".sw").forEach((s, i) => { s.style.background = colorOf(latencyTypes[i]); });
    const sel = document.getElementById("lat-type");
    latencyTypes.forEach((t) => sel.appendChild(el("option", { value: t }, `${t} (${count(DATA.latency.histograms[t].count)})`)));
    const preferred = latencyTypes.includes("SEND") ? "SEND" : latencyTypes[0];
    if (preferred) sel.value = preferred;
    sel.addEventListener("change", drawHist);
    document.getElementById("lat-table").appendChild(table(["request", "responses", "min", "p50 (bin)", "p99 (bin)", "max", "mean (ms)"],
      latencyTypes.map((t) => { const hst = DATA.latency.histograms[t]; return [t, count(hst.count), fmt(hst.min), fmt(hst.p50), fmt(hst.p99), fmt(hst.max), fmt(hst.mean)]; }), [0, 1, 1, 1, 1, 1, 1]));
  }
  function drawScatter() {
    const c = document.getElementById("lat-scatter");
    const { ctx, w, h } = canvasContext(c);
    const samples = DATA.latency.samples;
    if (!samples.length) return;
    let xmax = 0, ymin = Infinity, ymax = 0;
    for (const [t, , ms] of samples) { xmax = Math.max(xmax, t); if (ms > 0) { ymin = Math.min(ymin, ms); ymax = Math.max(ymax, ms); } }
    ymin = Math.pow(10, Math.floor(Math.log10(ymin === Infinity ? 0.001 : ymin))); ymax = Math.pow(10, Math.ceil(Math.log10(Math.max(ymax, ymin * 10))));
    const { X, Y } = axes(ctx, w, h, { l: 56, r: 24, t: 10, b: 34 }, 0, Math.max(xmax, 1e-6), ymin, ymax, true, "time from the capture's start (s)", "latency (ms)");
    for (const [t, type, ms, err] of samples) {
      const x = X(t), y = Y(Math.max(ms, ymin));
      ctx.fillStyle = ctx.strokeStyle = err ? "#c5221f" : colorOf(type);
      if (err) { ctx.beginPath(); ctx.moveTo(x - 3, y - 3); ctx.lineTo(x + 3, y + 3); ctx.moveTo(x + 3, y - 3); ctx.lineTo(x - 3, y + 3); ctx.stroke(); }
      else ctx.fillRect(x - 1.5, y - 1.5, 3, 3);
    }
  }
  function histogram(canvas, hist, color, xlabel) {
    const { ctx, w, h } = canvasContext(canvas);
    const edges = DATA.latency.edges_ms;
    if (!hist || !hist.count) { ctx.fillStyle = "#667085"; ctx.fillText("no values", 10, 20); return; }
    let lo = hist.bins.findIndex((n) => n > 0), hi = hist.bins.length - 1 - [...hist.bins].reverse().findIndex((n) => n > 0);
    lo = Math.max(1, lo - 5); hi = Math.min(edges.length - 1, hi + 5); // at least a decade around the values
    const most = Math.max(...hist.bins);
    const { X, Y } = axes(ctx, w, h, { l: 48, r: 28, t: 8, b: 34 }, Math.log10(edges[lo - 1]), Math.log10(edges[hi]), 0, most, false, xlabel, "count");
    ctx.fillStyle = color;
    for (let i = lo; i <= hi; i++) {
      const n = hist.bins[i]; if (!n) continue;
      const x0 = X(Math.log10(edges[i - 1])), x1 = X(Math.log10(edges[Math.min(i, edges.length - 1)]));
      ctx.fillRect(x0 + 0.5, Y(n), Math.max(1, x1 - x0 - 1), Y(0) - Y(n));
    }
    // the x axis is log10(ms): relabel the ticks as milliseconds
    ctx.fillStyle = "#fff"; ctx.fillRect(0, h - 30, w, 14); ctx.fillStyle = "#667085"; ctx.textAlign = "center";
    for (let e = Math.ceil(Math.log10(edges[lo - 1])); e <= Math.floor(Math.log10(edges[hi])); e++) ctx.fillText(`${Math.pow(10, e) >= 1 ? Math.pow(10, e) : Math.pow(10, e).toPrecision(1)} ms`, X(e), h - 20);
  }
  function drawHist() {
    const t = document.getElementById("lat-type").value;
    histogram(document.getElementById("lat-hist"), DATA.latency.histograms[t], colorOf(t), `${t} latency, log bins (10 per decade)`);
  }
  function drawThroughput() {
    const c = document.getElementById("tp-canvas");
    const { ctx, w, h } = canvasContext(c);
    const tp = DATA.throughput, width = tp.width_s;
    document.getElementById("tp-note").textContent = tp.buckets.length ? `Buckets of ${fmt(width, 3)} s, over the whole capture.` : "No messages in this capture.";
    if (!tp.buckets.length) return;
    let xmax = 0, ymax = 0;
    for (const b of tp.buckets) { xmax = Math.max(xmax, b[0] + width); ymax = Math.max(ymax, b[1] / width, b[3] / width); }
    const { X, Y } = axes(ctx, w, h, { l: 64, r: 24, t: 10, b: 34 }, 0, xmax, 0, Math.max(ymax, 1), false, "time from the capture's start (s)", "messages / s");
    for (const b of tp.buckets) {
      const x0 = X(Math.max(0, b[0])), x1 = X(b[0] + width), half = Math.max(1, (x1 - x0) / 2 - 0.5);
      ctx.fillStyle = "#2f6fd6"; ctx.fillRect(x0, Y(b[1] / width), half, Y(0) - Y(b[1] / width));
      ctx.fillStyle = "#e07b16"; ctx.fillRect(x0 + half, Y(b[3] / width), half, Y(0) - Y(b[3] / width));
    }
  }

  // ------------------------------------------------------------------ journeys
  const J = DATA.journeys;
  let journeyShown = [];
  function renderJourneys() {
    document.getElementById("jr-note").textContent = `Each row is one entry (a message, or a batch) by topic and ledger:entry: SEND → SEND_RECEIPT (publish latency) → each MESSAGE delivery (delay from the SEND, redeliveries) → its ACK (ack latency). ` +
      `${count(J.total)} journeys in the capture` + (J.kept < J.total ? `, the first ${count(J.kept)} listed` : "") +
      (J.closed_early ? `; ${count(J.closed_early)} closed early (too many open at once)` : "") +
      (J.milestones_dropped ? `; ${count(J.milestones_dropped)} deliveries and acks counted but not kept (memory budget)` : "") +
      ". `pulsar-dissect follow CAPTURE --message LEDGER:ENTRY[:BATCH]` tells one in the terminal.";
    const search = document.getElementById("jr-search");
    let timer = null;
    search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(listJourneys, 150); });
    listJourneys();
    const e2e = document.getElementById("jr-e2e");
    const topics = Object.entries(J.end_to_end);
    if (!topics.length) e2e.appendChild(el("p", { class: "muted" }, "No message was sent or delivered."));
    for (const [topic, d] of topics.slice(0, 50)) {
      e2e.appendChild(el("h3", { class: "mono" }, topic));
      e2e.appendChild(table(["", "count", "p50 (bin)", "p99 (bin)", "max (ms)"], [["publish (SEND → receipt)", d.publish], ["send → deliver", d.send_deliver], ["send → ack", d.send_ack]]
        .map(([n, x]) => [n, count(x.count), fmt(x.p50), fmt(x.p99), fmt(x.max)]), [0, 1, 1, 1, 1]));
      const box = el("div", { class: "e2e" });
      const c1 = el("canvas"), c2 = el("canvas");
      box.appendChild(el("div", {}, el("div", { class: "muted" }, "send → deliver"), c1));
      box.appendChild(el("div", {}, el("div", { class: "muted" }, "send → ack"), c2));
      e2e.appendChild(box);
      histogram(c1, d.send_deliver, "#2a9d55", "ms, log bins");
      histogram(c2, d.send_ack, "#8e44ad", "ms, log bins");
    }
    if (topics.length > 50) e2e.appendChild(el("p", { class: "muted" }, `${topics.length - 50} more topics not drawn.`));
  }
  function listJourneys() {
    const q = document.getElementById("jr-search").value.trim().toLowerCase();
    journeyShown = [];
    for (let i = 0; i < J.rows.length; i++) {
      const j = J.rows[i];
      if (q) {
        // a number: the producer's sequence id, also inside a batch (its entries have the ids that follow)
        const seq = /^\d+$/.test(q) ? Number(q) : null;
        const inBatch = seq !== null && typeof j.sequence_id === "number" && j.sequence_id <= seq && seq < j.sequence_id + (j.entries || 1);
        const hay = `${j.id} ${j.topic || ""} ${j.producer || ""}`.toLowerCase();
        if (!(inBatch || hay.includes(q) || j.id === q || j.id.startsWith(q + ":"))) continue;
      }
      journeyShown.push(i);
      if (journeyShown.length >= 500) break;
    }
    const list = document.getElementById("jr-list");
    list.textContent = "";
    const t = table(["topic", "message id", "producer", "seq", "entries", "publish (ms)", "deliveries", "first delay (ms)", "redeliveries", "acked", "ack latency (ms)"], [], null);
    for (const i of journeyShown) {
      const j = J.rows[i];
      const first = j.deliveries[0];
      const acked = j.deliveries.filter((d) => d[5] !== null && d[8] == null);
      const tr = el("tr", { "data-journey": j.id });
      [el("span", { class: "mono" }, j.topic ?? "?"), j.id, j.producer ?? "–", fmt(j.sequence_id), fmt(j.entries), fmt(j.publish_ms), String(j.deliveries.length),
        first ? fmt(first[3]) : "–", String(j.redeliveries), `${acked.length}/${j.deliveries.length}`, acked.length ? fmt(acked[0][6]) : "–"].forEach((v) => tr.appendChild(el("td", {}, v)));
      tr.addEventListener("click", () => { list.querySelectorAll("tr.sel").forEach((x) => x.classList.remove("sel")); tr.classList.add("sel"); showJourney(j); });
      t.appendChild(tr);
    }
    list.appendChild(t);
    const counter = document.getElementById("jr-count");
    counter.textContent = `${journeyShown.length}${journeyShown.length >= 500 ? "+" : ""} shown`;
  }
  function showJourney(j) {
    const view = document.getElementById("jr-view");
    view.textContent = "";
    view.appendChild(el("h3", {}, `Journey of ${j.id} on `, el("span", { class: "mono" }, j.topic ?? "?")));
    const lines = [];
    if (j.publish_ms !== null) lines.push(`published by ${j.producer ?? "?"} (sequence id ${fmt(j.sequence_id)}) in ${fmt(j.publish_ms)} ms`);
    for (const d of j.deliveries) lines.push(`delivered to ${d[2] ?? "?"} on subscription ${d[1] ?? "?"} ${d[3] !== null ? d[3] + " ms after the SEND" : ""}${d[4] ? ` (redelivery count ${d[4]})` : ""}; ` +
      (d[8] != null ? `dropped unread by the client (${d[8]}), acknowledged with that error by frame #${d[5]}` :
       d[5] !== null ? `acknowledged by frame #${d[5]} ${fmt(d[6])} ms after delivery (${fmt(d[7])} ms after the SEND)` : "never acknowledged in the capture"));
    view.appendChild(el("ul", {}, ...lines.map((l) => el("li", {}, l))));
    const rows = el("div", { id: "jr-frames" });
    for (const index of j.frames) {
      const pos = POS_OF_INDEX.get(index);
      if (pos === undefined) { rows.appendChild(el("div", { class: "trow", "data-index": String(index) }, el("span", { class: "c-index" }, index), el("span", { class: "c-info muted" }, "(beyond the frames kept in this report)"))); continue; }
      const r = ROWS[pos];
      const row = el("div", { class: "trow" + (isError(r) ? " error" : ""), "data-index": String(index) }, el("span", { class: "c-index" }, index), el("span", { class: "c-time" }, fmt(r[COL.time], 6)),
        el("span", { class: "c-conn" }, "c" + r[COL.conn]), el("span", { class: "c-dir" }, r[COL.direction] === "to_broker" ? "→" : "←"), el("span", { class: "c-type" }, r[COL.type]), el("span", { class: "c-info" }, r[COL.info]));
      row.addEventListener("click", () => showDetail(pos));
      rows.appendChild(row);
    }
    view.appendChild(rows);
  }

  const RENDER = { summary: renderSummary, timeline: renderTimeline, sequence: renderSequence, latency: renderLatency, journeys: renderJourneys };
  const REDRAW = { sequence: () => { drawOverview(); drawSeq(); }, latency: () => { drawScatter(); drawHist(); }, throughput: drawThroughput, timeline: drawTable };
  showTab("summary");
  document.body.dataset.ready = "1"; // the tests wait for this
})();
