"""The status page: one HTML document that draws ``/status.json`` every few seconds.

Per table: stage positions (ledger snapshot, merge watermark), lag, freshness against
its SLA with a chart of the last hour, dead letters by reason, schema version, files,
last maintenance; below, the supervised stages. Every figure sits in an element with
``data-table`` and ``data-field`` attributes, so a browser test reads the numbers from
the rendered page. No external assets: the page works offline.
"""

from __future__ import annotations

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>icetide status</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.breached { color: #b00; font-weight: bold; } .ok { color: #070; }
svg { vertical-align: middle; }
</style></head>
<body>
<h1>icetide <span id="pipeline"></span></h1>
<p>updated <span id="updated">never</span></p>
<table id="tables"><thead><tr>
<th>table</th><th>ledger snapshot</th><th>watermark</th><th>lag (events)</th>
<th>freshness (s)</th><th>SLA (s)</th><th>SLA</th><th>last hour</th>
<th>dead letters</th><th>schema</th><th>data files</th><th>delete files</th>
<th>snapshots</th><th>last maintenance</th></tr></thead><tbody></tbody></table>
<h2>stages</h2>
<table id="stages"><thead><tr><th>stage</th><th>restarts</th><th>last</th></tr></thead>
<tbody></tbody></table>
<script>
function cell(tr, table, field, text, cls) {
  const td = document.createElement("td");
  td.dataset.table = table; td.dataset.field = field;
  td.textContent = text === null || text === undefined ? "-" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td); return td;
}
function chart(history, sla) {
  const w = 160, h = 30, now = Date.now() / 1000, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  const values = history.filter(p => p[1] !== null);
  const top = Math.max(1, sla || 0, ...values.map(p => p[1]));
  const x = t => w - (now - t) / 3600 * w, y = v => h - v / top * (h - 2) - 1;
  if (sla) {
    const line = document.createElementNS(ns, "line");
    line.setAttribute("x1", 0); line.setAttribute("x2", w);
    line.setAttribute("y1", y(sla)); line.setAttribute("y2", y(sla));
    line.setAttribute("stroke", "#b00"); line.setAttribute("stroke-dasharray", "3 2");
    svg.appendChild(line);
  }
  const path = document.createElementNS(ns, "polyline");
  path.setAttribute("points", values.map(p => x(p[0]) + "," + y(p[1])).join(" "));
  path.setAttribute("fill", "none"); path.setAttribute("stroke", "#06c");
  svg.appendChild(path); return svg;
}
function when(at) { return at ? new Date(at * 1000).toISOString().slice(11, 19) : null; }
async function refresh() {
  const r = await fetch("status.json", {cache: "no-store"});
  const s = await r.json();
  document.getElementById("pipeline").textContent = s.pipeline;
  const body = document.querySelector("#tables tbody"); body.replaceChildren();
  for (const t of s.tables) {
    const tr = document.createElement("tr"); tr.dataset.table = t.table;
    cell(tr, t.table, "table", t.table);
    cell(tr, t.table, "ledger_snapshot", t.ledger_snapshot);
    cell(tr, t.table, "watermark", t.watermark);
    cell(tr, t.table, "lag_events", t.lag_events);
    const f = t.freshness_seconds;
    cell(tr, t.table, "freshness_seconds", f === null || f === undefined ? null : f.toFixed(0));
    cell(tr, t.table, "sla_seconds", t.sla_seconds);
    const verdict = t.sla_seconds ? (t.breached ? "breached" : "ok") : null;
    cell(tr, t.table, "sla", verdict, verdict);
    cell(tr, t.table, "chart", "").appendChild(chart(t.history || [], t.sla_seconds));
    const dl = t.dead_letters || {};
    const td = cell(tr, t.table, "dead_letters", "");
    const reasons = Object.keys(dl);
    if (!reasons.length) td.textContent = "0";
    for (const reason of reasons) {
      const line = document.createElement("div");
      const name = document.createElement("span"); name.textContent = reason + " ";
      const n = document.createElement("span"); n.textContent = dl[reason];
      n.dataset.table = t.table; n.dataset.field = "dead_letters"; n.dataset.reason = reason;
      line.append(name, n); td.appendChild(line);
    }
    cell(tr, t.table, "schema_version", t.schema_version);
    cell(tr, t.table, "data_files", t.data_files);
    cell(tr, t.table, "delete_files", t.delete_files);
    cell(tr, t.table, "snapshots", t.snapshots);
    const m = t.last_maintenance;
    cell(tr, t.table, "last_maintenance", m ? m.outcome + " at " + when(m.at) : null);
    body.appendChild(tr);
  }
  const stages = document.querySelector("#stages tbody"); stages.replaceChildren();
  for (const [name, st] of Object.entries(s.stages)) {
    const tr = document.createElement("tr");
    cell(tr, name, "stage", name); cell(tr, name, "restarts", st.restarts);
    cell(tr, name, "last", st.last_error || st.last_message || "");
    stages.appendChild(tr);
  }
  document.getElementById("updated").textContent = when(s.now);
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
"""


def render_page() -> bytes:
    """The page (static: the figures come from ``status.json``)."""
    return PAGE.encode()
