// Weir's web page: polls /api/state every second and draws the jobs, the selected job's
// dataflow graph, the sources and the connections. No dependencies; every value from the
// server goes into the page as text, never as HTML.
"use strict";

const REFRESH_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";
// The name of the job whose graph is shown; a link can name it: /#job=NAME.
let selected = location.hash.startsWith("#job=") ? decodeURIComponent(location.hash.slice(5)) : null;
// Per job, its recent figures: [{at: ms when taken, rows: Map(operator index -> rows_in)}].
const history = new Map();
// Rates are over at least this long, so figures published at a job's commits (every 200 ms)
// give steady rates.
const RATE_SPAN_MS = 1000;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function num(n) {
  if (n === null || n === undefined) return "";
  if (n >= 1e9) return (n / 1e9).toFixed(1) + " G";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + " M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + " k";
  return String(Math.round(n));
}

function bytes(n) {
  if (!n) return "0 B";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + units[i];
}

function time(ms) {
  if (ms === null || ms === undefined) return "";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

function duration(ms) {
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return (ms / 60000).toFixed(1) + " min";
}

function cell(v, cls) { return el("td", cls ? { class: cls } : {}, v); }

// Rows/s into each operator, by "job/index": over the span from the newest figures of the job
// taken at least RATE_SPAN_MS before its latest ones (none until there are such).
function rates(state) {
  const out = new Map();
  for (const j of state.jobs) {
    const past = history.get(j.name) || [];
    const now = { at: j.figures_at_ms, rows: new Map(j.operators.map(o => [o.index, o.rows_in])) };
    if (!past.length || past[past.length - 1].at !== now.at) past.push(now);
    while (past.length > 2 && past[1].at <= now.at - RATE_SPAN_MS) past.shift();
    history.set(j.name, past);
    const base = past[0];
    if (now.at - base.at < RATE_SPAN_MS) continue;
    for (const [index, rows] of now.rows) {
      const before = base.rows.get(index);
      if (before !== undefined && rows >= before) out.set(j.name + "/" + index, (rows - before) * 1000 / (now.at - base.at));
    }
  }
  return out;
}

function stateOf(state, job, index) {
  let cache = 0, disk = 0, any = false;
  for (const t of state.state_tables) {
    if (t.job !== job || (index !== undefined && t.operator_index !== index)) continue;
    any = true;
    disk += t.disk_bytes;
    if (t.cache) cache += t.cache.bytes;
  }
  return any ? { cache, disk } : null;
}

function drawJobs(data, rate) {
  const state = data.state;
  const body = document.querySelector("#jobs tbody");
  body.replaceChildren();
  document.getElementById("no-jobs").hidden = state.jobs.length > 0;
  if (!selected || !state.jobs.some(j => j.name === selected)) selected = state.jobs.length ? state.jobs[0].name : null;
  for (const j of state.jobs) {
    const sources = j.operators.filter(o => o.name === "StreamSource");
    const rowsIn = sources.reduce((a, o) => a + o.rows_in, 0);
    const known = sources.every(o => rate.has(j.name + "/" + o.index));
    const rowsPerS = known ? num(sources.reduce((a, o) => a + rate.get(j.name + "/" + o.index), 0)) : "…";
    const parts = state.sources.filter(s => s.job === j.name);
    const lags = parts.map(s => s.lag).filter(l => l !== null);
    const marks = j.operators.map(o => o.watermark).filter(w => w !== null);
    const sourceMarks = parts.map(s => s.watermark).filter(w => w !== null);
    const watermark = marks.length ? Math.min(...marks) : (sourceMarks.length ? Math.min(...sourceMarks) : null);
    const st = stateOf(state, j.name);
    const tr = el("tr", { class: "job" + (j.name === selected ? " selected" : ""), "data-job": j.name },
      cell(j.name), cell(j.kind), el("td", { class: "status-" + j.status, title: j.error || "" }, j.status),
      cell(j.operators.reduce((a, o) => Math.max(a, o.parallelism), 0) || "", "num"),
      cell(rowsPerS, "num"), cell(num(rowsIn), "num"),
      cell(lags.length ? num(Math.max(...lags)) : "", "num"), cell(time(watermark)),
      cell(duration(Math.max(0, data.now_ms - state.committed_at_ms)), "num"),
      cell(st ? "cache " + bytes(st.cache) + ", disk " + bytes(st.disk) : ""));
    tr.addEventListener("click", () => {
      selected = j.name;
      history.replaceState(null, "", "#job=" + encodeURIComponent(j.name));
      refresh();
    });
    body.append(tr);
  }
}

// Lays the job's operators out as a tree: the root (view or sink) on the right, each input one
// column to the left; rows by the order of the leaves.
function layout(ops) {
  const children = new Map(ops.map(o => [o.index, []]));
  for (const o of ops) if (o.parent !== null && children.has(o.parent)) children.get(o.parent).push(o.index);
  const depth = new Map(), row = new Map();
  let nextRow = 0, maxDepth = 0;
  const walk = (i, d) => {
    depth.set(i, d);
    maxDepth = Math.max(maxDepth, d);
    const kids = children.get(i);
    if (!kids.length) { row.set(i, nextRow++); return; }
    for (const k of kids) walk(k, d + 1);
    row.set(i, kids.reduce((a, k) => a + row.get(k), 0) / kids.length);
  };
  const root = ops.find(o => o.parent === null);
  if (root) walk(root.index, 0);
  return { depth, row, maxDepth, rows: Math.max(nextRow, 1) };
}

function drawGraph(data, rate) {
  const state = data.state;
  const section = document.getElementById("graph-section");
  const job = state.jobs.find(j => j.name === selected);
  section.hidden = !job;
  if (!job) return;
  document.getElementById("graph-job").textContent = job.name;
  document.getElementById("definition").textContent = job.definition;
  const ops = job.operators;
  const box = { w: 240, h: 80, dx: 360, dy: 110, pad: 20 };
  const { depth, row, maxDepth, rows } = layout(ops);
  const width = (maxDepth + 1) * box.dx - (box.dx - box.w) + 2 * box.pad;
  const height = rows * box.dy - (box.dy - box.h) + 2 * box.pad;
  // Scaled down to the page's width when wider.
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", style: "max-width: 100%; height: auto" });
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#7b8794" }));
  defs.append(marker);
  root.append(defs);
  const pos = i => ({ x: box.pad + (maxDepth - depth.get(i)) * box.dx, y: box.pad + row.get(i) * box.dy });
  const byIndex = new Map(ops.map(o => [o.index, o]));
  for (const o of ops) {
    if (o.parent === null || !depth.has(o.index)) continue;
    // A reused sub-plan (computed once) feeds several operators: one edge to each.
    for (const target of [o.parent, ...(o.reused_by || []).map(([p]) => p)]) {
      if (!depth.has(target)) continue;
      const a = pos(o.index), b = pos(target);
      const x1 = a.x + box.w, y1 = a.y + box.h / 2, x2 = b.x, y2 = b.y + box.h / 2;
      const mx = (x1 + x2) / 2;
      root.append(svg("path", { class: "edge", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}` }));
      // The changelog the edge carries above it, how rows are exchanged below it.
      const changelog = (/changelog=(\S+)/.exec(o.detail) || [])[1] || "";
      const exchange = byIndex.get(target).exchange;
      [[changelog, -6], [exchange, 14]].forEach(([label, dy]) => {
        const text = label.length > 19 ? label.slice(0, 18) + "…" : label;
        const t = svg("text", { class: "edge-label", x: mx, y: (y1 + y2) / 2 + dy, "text-anchor": "middle" }, text);
        t.append(svg("title", {}, label));
        root.append(t);
      });
    }
  }
  for (const o of ops) {
    if (!depth.has(o.index)) continue;
    const p = pos(o.index);
    const kind = o.parent === null ? " root" : (o.name === "StreamSource" ? " source" : "");
    const g = svg("g", { class: "op" + kind, transform: `translate(${p.x},${p.y})`, "data-operator": o.name });
    g.append(svg("title", {}, `${o.name}: ${o.detail}`));
    g.append(svg("rect", { width: box.w, height: box.h }));
    g.append(svg("text", { class: "name", x: 8, y: 17 }, `${o.name}${o.parallelism > 1 ? " ×" + o.parallelism : ""}`));
    const r = rate.get(job.name + "/" + o.index);
    g.append(svg("text", { x: 8, y: 35 }, `${r === undefined ? "…" : num(r)} rows/s · ${num(o.rows_in)} in · ${num(o.rows_out)} out`));
    const st = stateOf(state, job.name, o.index);
    if (st) g.append(svg("text", { x: 8, y: 53 }, `cache ${bytes(st.cache)} · disk ${bytes(st.disk)}`));
    const clock = [];
    if (o.watermark !== null) clock.push("watermark " + time(o.watermark).slice(11, 19));
    if (o.late_rows) clock.push(num(o.late_rows) + " late");
    g.append(svg("text", { x: 8, y: st ? 71 : 53 }, clock.join(" · ")));
    root.append(g);
  }
  document.getElementById("graph").replaceChildren(root);
}

function drawSources(state) {
  const body = document.querySelector("#sources tbody");
  body.replaceChildren(...state.sources.map(s => el("tr", {},
    cell(s.job), cell(s.relation), cell(s.partition, "num"), cell(num(s.position), "num"),
    cell(s.lag === null ? "" : num(s.lag), "num"), cell(time(s.watermark)),
    cell(num(s.rows_read), "num"), cell(num(s.dead_letters), "num"), cell(s.finished ? "yes" : "no"))));
}

function drawActivity(state) {
  const body = document.querySelector("#activity tbody");
  body.replaceChildren(...state.activity.map(a => el("tr", {},
    cell(a.pid, "num"), cell(a.usename), cell(a.application_name), cell(a.client_addr || ""), cell(a.state),
    cell(a.query.length > 120 ? a.query.slice(0, 119) + "…" : a.query))));
}

async function refresh() {
  try {
    const response = await fetch("/api/state", { cache: "no-store" });
    if (!response.ok) throw new Error(await response.text());
    const data = await response.json();
    const rate = rates(data.state);
    document.getElementById("epoch").textContent =
      `epoch ${data.state.epoch}, committed ${duration(Math.max(0, data.now_ms - data.state.committed_at_ms))} ago`;
    document.getElementById("stale").hidden = !data.stale;
    document.getElementById("error").hidden = true;
    drawJobs(data, rate);
    drawGraph(data, rate);
    drawSources(data.state);
    drawActivity(data.state);
    document.body.dataset.loaded = "true";
  } catch (e) {
    const err = document.getElementById("error");
    err.textContent = "cannot reach the server: " + e.message;
    err.hidden = false;
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
