"""The status page: one HTML document that draws ``/status.json`` every few seconds.

Made to be read with a thousand tables: the supervised stages first, each with its state
(idle, running, backing off, failed) whether or not it has reported yet; then a count
of tables per verdict, a filter by name, and the tables worst first (failing or held,
then stale beyond their SLA, then the oldest freshness: :mod:`icetide.observe.display`).
Per table: its verdict and why, freshness against its SLA with a chart of the last hour,
lag, dead letters by reason, schema version and the phase of its latest change with the
time to each phase, the ledger snapshot and merge watermark (shortened; the whole id in
the tooltip), files and snapshots, the last merge and maintenance. Figures are
humanized by the server (``status.json``'s ``text``); the page only draws, in a fixed
layout that fits 1,400 pixels without scrolling sideways.

Every figure sits in an element with ``data-table`` and ``data-field`` attributes and
its raw value in ``data-value``, so a browser test reads the numbers from the rendered
page. No external assets: the page works offline. The filter box asks the server
(``status.json?filter=``), so the page and ``icetide status --filter`` match alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from icetide.observe.board import StatusBoard
from icetide.observe.metrics import MetricsServer

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>icetide status</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
* { box-sizing: border-box; }
body { font: 13px system-ui, sans-serif; margin: 1em 1.5em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .2em; } h2 { font-size: 1.1em; margin: 1em 0 .4em; }
.muted { color: #777; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 3px 6px; text-align: left;
  vertical-align: top; overflow-wrap: anywhere; }
th { background: #f6f6f6; position: sticky; top: 0; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px; }
.failing, .failed { background: #b00; color: #fff; }
.held, .backing-off { background: #d97a00; color: #fff; }
.stale { background: #fbe0e0; color: #900; } .ok { background: #e2f3e2; color: #060; }
.unknown, .idle, .stopped { background: #eee; color: #555; }
.running { background: #dceeff; color: #035; }
.why { color: #900; font-size: 12px; }
.late { color: #b00; font-weight: 600; }
.small { font-size: 12px; color: #555; }
.id { white-space: nowrap; }
#bar { display: flex; gap: 1.5em; align-items: center; margin: .6em 0; flex-wrap: wrap; }
#filter { font: inherit; padding: 3px 6px; width: 22em; }
svg { display: block; }
</style></head>
<body>
<h1>icetide <span id="pipeline"></span></h1>
<div class="muted">updated <span id="updated">never</span></div>
<h2>stages</h2>
<table id="stages"><colgroup><col style="width:14%"><col style="width:20%">
<col style="width:7%"><col></colgroup>
<thead><tr><th>stage</th><th>state</th><th>restarts</th><th>last</th></tr></thead>
<tbody></tbody></table>
<h2>tables</h2>
<div id="bar"><span id="counts"></span>
<input id="filter" type="search" placeholder="filter by name (words, any order)"
 autocomplete="off"><span id="shown" class="muted"></span></div>
<table id="tables"><colgroup>
<col style="width:15%"><col style="width:11%"><col style="width:11%"><col style="width:134px">
<col style="width:6%"><col style="width:9%"><col style="width:10%"><col style="width:11%">
<col style="width:8%"><col></colgroup>
<thead><tr><th>table</th><th>verdict</th><th>freshness / SLA</th><th>last hour</th>
<th>lag</th><th>dead letters</th><th>schema</th><th>snapshots</th><th>files</th>
<th>last merge, maintenance (UTC)</th></tr></thead><tbody></tbody></table>
<script>
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function tag(e, table, field, value, title) {
  e.dataset.table = table; e.dataset.field = field;
  if (value !== undefined && value !== null) e.dataset.value = String(value);
  if (title) e.title = title;
  return e;
}
function span(table, field, text, value, title, cls) {
  return tag(el("span", text, cls), table, field, value, title);
}
function cell(tr, cls) { const td = el("td", null, cls); tr.appendChild(td); return td; }
function line(td, ...parts) {
  const d = el("div");
  d.append(...parts);
  td.appendChild(d); return d;
}
function chart(history, sla, now) {
  const w = 120, h = 24, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  const values = history.filter(p => p[1] !== null);
  const top = Math.max(1, sla || 0, ...values.map(p => p[1]));
  const x = at => w - (now - at) / 3600 * w, y = v => h - v / top * (h - 2) - 1;
  if (sla) {
    const l = document.createElementNS(ns, "line");
    l.setAttribute("x1", 0); l.setAttribute("x2", w);
    l.setAttribute("y1", y(sla)); l.setAttribute("y2", y(sla));
    l.setAttribute("stroke", "#b00"); l.setAttribute("stroke-dasharray", "3 2");
    svg.appendChild(l);
  }
  const path = document.createElementNS(ns, "polyline");
  path.setAttribute("points", values.map(p => x(p[0]) + "," + y(p[1])).join(" "));
  path.setAttribute("fill", "none"); path.setAttribute("stroke", "#06c");
  svg.appendChild(path); return svg;
}
function when(at) { return at ? new Date(at * 1000).toISOString().slice(11, 19) : null; }
function row(t, now) {
  const n = t.table, x = t.text, tr = el("tr");
  tr.dataset.table = n; tr.dataset.verdict = t.verdict;
  cell(tr).appendChild(span(n, "table", n, n));
  const v = cell(tr);
  v.appendChild(span(n, "verdict", t.verdict, t.verdict, t.why, "badge " + t.verdict));
  if (t.why) v.appendChild(tag(el("div", t.why, "why"), n, "why", t.why));
  const f = cell(tr, "num");
  line(f, span(n, "freshness_seconds", x.freshness, t.freshness_seconds,
    t.newest_applied ? "newest applied source change " + t.newest_applied : null,
    t.breached ? "late" : null));
  line(f, span(n, "sla_seconds", "SLA " + x.sla, t.sla_seconds, null, "small"),
    " ", span(n, "sla", t.sla_seconds ? (t.breached ? "breached" : "ok") : "",
    t.sla_seconds ? (t.breached ? "breached" : "ok") : null, null, "small"));
  tag(cell(tr), n, "chart").appendChild(chart(t.history || [], t.sla_seconds, now));
  cell(tr, "num").appendChild(span(n, "lag_events", x.lag_events, t.lag_events,
    t.lag_events !== undefined ? t.lag_events + " ledger events not merged" : null));
  const dl = cell(tr, "num"), reasons = Object.entries(t.dead_letters || {});
  line(dl, span(n, "dead_letters_total", x.dead_letters,
    reasons.reduce((a, e) => a + e[1], 0)));
  for (const [reason, count] of reasons) {
    const s = span(n, "dead_letters", x.dead_letters_by_reason[reason], count, null, "small");
    s.dataset.reason = reason;
    line(dl, el("span", reason + " ", "small"), s);
  }
  const sc = cell(tr), pv = t.schema_change_version;
  line(sc, "v", span(n, "schema_version", t.schema_version ?? "-", t.schema_version), " ",
    span(n, "schema_phase", t.schema_phase ?? "-", t.schema_phase,
      pv ? "schema change to version " + pv : "no schema change at runtime",
      t.convergence_breached ? "late" : null));
  for (const [phase, seconds] of Object.entries(t.phase_seconds || {})) {
    if (seconds === null) continue;
    const s = span(n, "phase_seconds", x.phase_seconds[phase], seconds, null, "small");
    s.dataset.phase = phase;
    line(sc, el("span", phase + " ", "small"), s);
  }
  const sn = cell(tr, "small");
  // The ids as text: a JSON number of 19 digits is not exact in a browser.
  line(sn, "ledger ", span(n, "ledger_snapshot", x.ledger_snapshot, x.ledger_snapshot_id,
    x.ledger_snapshot_id, "id"));
  line(sn, "merged ", span(n, "watermark", x.watermark, x.watermark_id, x.watermark_id, "id"));
  const fl = cell(tr, "small");
  line(fl, span(n, "data_files", x.data_files, t.data_files), " data");
  line(fl, span(n, "delete_files", x.delete_files, t.delete_files), " delete");
  line(fl, span(n, "snapshots", x.snapshots, t.snapshots), " snapshots");
  const m = cell(tr, "small"), lm = t.last_maintenance;
  line(m, "merge ", span(n, "last_merge", x.last_merge, t.last_merge ? t.last_merge.events : null,
    t.last_merge ? "at " + when(t.last_merge.at) : null));
  line(m, "maint. ", span(n, "last_maintenance", x.last_maintenance,
    lm ? lm.outcome + " at " + when(lm.at) : null, lm ? "at " + when(lm.at) : null));
  return tr;
}
function stage(st) {
  const tr = el("tr"), n = st.name, cls = st.state ? st.state.replace(" ", "-") : "unknown";
  tr.dataset.stage = n;
  cell(tr).appendChild(span(n, "stage", n, n));
  const s = cell(tr);
  s.appendChild(span(n, "state", st.text, st.state, null, "badge " + cls));
  cell(tr, "num").appendChild(span(n, "restarts", st.restarts ?? 0, st.restarts ?? 0));
  const last = st.state === "failed" || st.state === "backing off"
    ? st.last_error : (st.last_message || st.last_error || "");
  cell(tr, "small").appendChild(span(n, "last", last, last,
    st.last_at ? "at " + when(st.last_at) : null));
  return tr;
}
let pending = null;
async function refresh() {
  const filter = document.getElementById("filter").value.trim();
  const url = "status.json" + (filter ? "?filter=" + encodeURIComponent(filter) : "");
  const r = await fetch(url, {cache: "no-store"});
  const s = await r.json();
  if (filter !== document.getElementById("filter").value.trim()) return;  // typed on
  document.getElementById("pipeline").textContent = s.pipeline;
  const stages = document.querySelector("#stages tbody");
  stages.replaceChildren(...s.stages.map(stage));
  const body = document.querySelector("#tables tbody");
  body.replaceChildren(...s.tables.map(t => row(t, s.now)));
  const c = s.counts, counts = document.getElementById("counts");
  counts.replaceChildren(el("b", c.tables.toLocaleString("en") + " tables"));
  for (const v of ["failing", "held", "stale", "ok", "unknown"]) {
    if (!c[v]) continue;
    const b = el("span", c[v].toLocaleString("en") + " " + v, "badge " + v);
    b.dataset.count = v; b.dataset.value = c[v];
    counts.append(" ", b);
  }
  document.getElementById("shown").textContent = filter
    ? c.matching.toLocaleString("en") + " of " + c.tables.toLocaleString("en") + " match"
    : "worst first";
  document.getElementById("updated").textContent = when(s.now);
  document.body.dataset.rendered = String(s.now);
}
const params = new URLSearchParams(location.search);
document.getElementById("filter").value = params.get("filter") || "";
document.getElementById("filter").addEventListener("input", () => {
  clearTimeout(pending);
  pending = setTimeout(() => {
    const f = document.getElementById("filter").value.trim();
    history.replaceState(null, "", f ? "?filter=" + encodeURIComponent(f) : location.pathname);
    refresh();
  }, 150);
});
refresh(); setInterval(refresh, 5000);
</script></body></html>
"""


def render_page() -> bytes:
    """The page (static: the figures come from ``status.json``)."""
    return PAGE.encode()


def status_json(board: StatusBoard, query: Mapping[str, str]) -> bytes:
    """``/status.json``: the board's snapshot, ``?filter=`` words of the table names and
    ``?limit=`` the worst N (:meth:`~icetide.observe.board.StatusBoard.snapshot`).

    Raises ValueError for a limit that is not a whole number (the server answers 400).
    """
    limit = query.get("limit")
    if limit is not None and not limit.isdigit():
        raise ValueError(f"limit must be a whole number, not {limit!r}")
    return board.encoded(query.get("filter"), int(limit) if limit else None)


def add_routes(server: MetricsServer, board: StatusBoard) -> None:
    """Serve the page at ``/`` and its data at ``/status.json`` from ``server``."""
    routes = server.routes
    routes["/"] = lambda query: (render_page(), "text/html; charset=utf-8")
    routes["/status.json"] = lambda query: (status_json(board, query), "application/json")
