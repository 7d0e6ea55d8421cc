// The workspace's tools, loaded by workspace.html after plotly and before it connects; they use the page's globals
// (W, $, esc, fmt, globRe, api, act, control, last, currentLayout, applyLayout, subscribe, TOKEN, dirty, replot).
//   cursors A and B on the time plots with each plotted signal's value at both and the difference;
//   an XY plot (y signals over an x signal, sample by sample of the same tick);
//   reference traces overlaid on the time plots, from a capture or a capture's CSV file;
//   gauges and lamps with limits;
//   parameter sets saved on the server (/api/paramsets), compared with the plant's and applied through set_params;
//   a layout exported to and imported from a file;
//   the last N seconds of rows loaded from the server's history (/api/history), and the recordings listed and
//   downloaded (/api/recordings).
// What the tests read: workspace.cursorRows, workspace.gaugeStates, workspace.refs, workspace.paramCompare,
// workspace.paramChange, workspace.exportedLayout, workspace.history, workspace.recordings.
"use strict";
(function () {
const T = W.tools = {};
const S = {cursor: {a: null, b: null}, xy: {x: "", y: ""}, gauges: [], refs: [], offset: 0, built: false};
const MAX_FILE_BYTES = 16 << 20, MAX_REFS = 4, MAX_REF_ROWS = 200000, MAX_GAUGES = 32, MAX_LAYOUT_BYTES = 1 << 20;
W.cursorRows = []; W.gaugeStates = []; W.refs = S.refs; W.paramCompare = null; W.paramChange = null;
const auth = () => TOKEN ? {Authorization: "Bearer " + TOKEN} : {};
const num = (id) => { const v = $(id).value.trim(); return v === "" ? null : Number(v); };

// ---- the panels, added to the page once -------------------------------------------------------------
function section(html, after) {
  const s = document.createElement("section");
  s.innerHTML = html;
  after.parentNode.insertBefore(s, after.nextSibling);
  return s;
}
function build() {
  const signals = $("plots").closest("section"), instruments = $("instruments").closest("section");
  const row = document.createElement("div");
  row.className = "row";
  row.innerHTML = `layout file <button id="layoutexport" title="download what the page shows as a JSON file">export</button>
    <label>import <input type="file" id="layoutimport" accept=".json,application/json"></label>`;
  $("layoutrow").after(row);
  const hist = document.createElement("div");
  hist.className = "row";
  hist.innerHTML = `<label title="rows of the last N seconds of run time, from the server's history (also rows this page never received)">
    from the server <input class="num" id="histsecs" value="60"> s</label><button id="histload">load history</button><span id="histnote"></span>`;
  row.after(hist);
  $("recfiles").insertAdjacentHTML("afterend", `<div class="row"><b>recordings</b> (the recording folder's MF4 files)
    <button id="reclist">list</button></div><table id="recordings"><tbody></tbody></table>`);
  const xy = section(`<h2>XY plot</h2><div class="row"><label>x <select id="xyx"></select></label>
    <label>y <input type="text" id="xyy" placeholder="names or globs" style="width: 12em"></label>
    <button id="xyshow">show</button><button id="xyclear">clear</button></div>
    <div id="xyplot" style="height: 300px; display: none"></div>`, signals);
  const refs = section(`<h2>Reference traces</h2><div class="row">
    <label>from a file (a capture's CSV) <input type="file" id="reffile" accept=".csv,text/csv"></label>
    <label title="added to a reference's run time">offset <input class="num" id="refoffset" value="0"> s</label>
    <button id="refclear">clear all</button></div><div id="reflist"></div>`, xy);
  section(`<h2>Cursors</h2><div class="row">click a plot to place
    <label><input type="radio" name="curwhich" value="a" checked> A</label><label><input type="radio" name="curwhich" value="b"> B</label>
    <label>A <input class="num" id="cura"> s</label><label>B <input class="num" id="curb"> s</label>
    <button id="curclear">clear</button><span id="curdt"></span></div>
    <table id="curtable"><thead><tr><th>signal</th><th>unit</th><th>A</th><th>B</th><th>B - A</th></tr></thead><tbody></tbody></table>`, signals);
  section(`<h2>Gauges and lamps</h2><div class="row"><select id="gsignal"></select>
    <select id="gkind" title="gauge: a bar from low to high; lamp: red outside the limits"><option>gauge</option><option>lamp</option></select>
    <label>low <input class="num" id="glo"></label><label>high <input class="num" id="ghi"></label><button id="gadd">add</button></div>
    <div id="gauges"></div>`, instruments);
  section(`<h2>Parameter sets</h2><div class="row" id="psetrow">
    <input type="text" id="psetname" placeholder="name" style="width: 9em"><button id="psetsave">save current</button>
    <select id="psetlist"></select><button id="psetcompare">compare</button><button id="psetapply">apply</button></div>
    <div id="psetnote"></div>
    <table id="psettable"><thead></thead><tbody></tbody></table>`, $("params").closest("section"));
  void refs;
  const style = document.createElement("style");
  style.textContent = `.gauge { display: flex; gap: 6px; align-items: center; margin: 2px 0; }
    .gbar { width: 10em; height: 10px; background: #e3e6ea; border: 1px solid #ccd; }
    .gbar div { height: 100%; background: #4a8; } .gauge.alarm .gbar div { background: #c33; }
    .lamp { width: 12px; height: 12px; border-radius: 6px; background: #bbb; display: inline-block; }
    .gauge.ok .lamp { background: #2b2; } .gauge.alarm .lamp { background: #d22; }
    tr.differs td { color: #b50; font-weight: bold; }`;
  document.head.appendChild(style);
  $("layoutimport").addEventListener("change", importLayout);
  $("reffile").addEventListener("change", referenceFile);
  $("refoffset").addEventListener("change", () => { S.offset = Number($("refoffset").value) || 0; shiftRefs(); replot(); });
  for (const id of ["cura", "curb"]) $(id).addEventListener("change", () => { S.cursor[id.slice(3)] = num(id); replot(); });
}
T.init = function () {
  if (!S.built) { build(); S.built = true; listParamSets(); listRecordings(); }
  const opts = Object.keys(W.signals).map((n) => `<option>${esc(n)}</option>`).join("");
  const keep = [$("xyx").value, $("gsignal").value];
  $("xyx").innerHTML = opts; $("gsignal").innerHTML = opts;
  if (keep[0]) $("xyx").value = keep[0];
  if (keep[1]) $("gsignal").value = keep[1];
};
T.signals = () => [S.xy.x, ...xyNames(), ...S.gauges.map((g) => g.name)].filter((n) => n && W.signals[n]);

// ---- cursors -----------------------------------------------------------------------------------------
function nearest(d, x) {  // the held sample nearest in time to x: {tick, t, y}, or null
  if (!d || !d.t.length || x === null) return null;
  let lo = 0, hi = d.t.length - 1;
  while (lo < hi) { const m = (lo + hi) >> 1; if (d.t[m] < x) lo = m + 1; else hi = m; }
  if (lo > 0 && x - d.t[lo - 1] <= d.t[lo] - x) lo--;
  return {tick: d.tick[lo], t: d.t[lo], y: d.y[lo]};
}
T.onPlotClick = function (ev) {
  if (!ev.points || !ev.points.length) return;
  const which = document.querySelector("input[name=curwhich]:checked").value;
  S.cursor[which] = ev.points[0].x;
  $("cur" + which).value = ev.points[0].x;
  replot();
};
T.cursorShapes = function () {
  return ["a", "b"].filter((k) => S.cursor[k] !== null).map((k) => ({type: "line", xref: "x", yref: "paper", x0: S.cursor[k],
    x1: S.cursor[k], y0: 0, y1: 1, line: {color: k === "a" ? "#d33" : "#33d", width: 1, dash: "dot"}}));
};
function cursorReadout() {
  const {a, b} = S.cursor;
  W.cursorRows = W.picked.map((n) => {
    const pa = nearest(W.data[n], a), pb = nearest(W.data[n], b);
    return {name: n, a: pa, b: pb, delta: pa && pb ? pb.y - pa.y : null, dt: pa && pb ? pb.t - pa.t : null};
  });
  const first = W.cursorRows.find((r) => r.dt !== null);
  setText($("curdt"), first ? `B - A: ${fmt(first.dt, 6)} s, ${first.b.tick - first.a.tick} ticks` : "");
  const at = (p) => p ? `${fmt(p.y, 6)} @ ${fmt(p.t, 6)} s` : "-";
  const html = a === null && b === null ? "" : W.cursorRows.map((r) =>
    `<tr data-signal="${esc(r.name)}"><td>${esc(r.name)}</td><td>${esc(W.signals[r.name].unit)}</td><td>${at(r.a)}</td>` +
    `<td>${at(r.b)}</td><td>${fmt(r.delta, 6)}</td></tr>`).join("");
  const tb = $("curtable").tBodies[0];
  if (tb.lastHTML !== html) { tb.lastHTML = html; tb.innerHTML = html; }  // no DOM write while the cursors' rows stand
}

// ---- the XY plot -------------------------------------------------------------------------------------
function xyNames() {
  const names = Object.keys(W.signals), out = [];
  for (const p of S.xy.y.split(",").map((s) => s.trim()).filter((s) => s)) {
    const re = globRe(p);
    for (const n of names) if (re.test(n) && !out.includes(n)) out.push(n);
  }
  return out;
}
function drawXY() {
  const div = $("xyplot");
  if (!S.xy.x || !W.signals[S.xy.x]) { if (div.style.display !== "none") div.style.display = "none"; return; }
  div.style.display = "";
  const xd = W.data[S.xy.x] || {tick: [], y: []}, at = new Map();
  xd.tick.forEach((tk, i) => at.set(tk, xd.y[i]));
  const traces = xyNames().map((n) => {
    const d = W.data[n] || {tick: [], y: []}, x = [], y = [], ticks = [];
    d.tick.forEach((tk, i) => { if (at.has(tk)) { x.push(at.get(tk)); y.push(d.y[i]); ticks.push(tk); } });
    return {x: x, y: y, customdata: ticks, name: n + " [" + W.signals[n].unit + "]", type: "scatter", mode: "lines+markers", marker: {size: 3}};
  });
  Plotly.react(div, traces, {margin: {l: 50, r: 10, t: 30, b: 40}, uirevision: "keep", datarevision: Math.random(),
    legend: {orientation: "h", x: 0, y: 1, yanchor: "bottom"},
    xaxis: {title: {text: S.xy.x + " [" + W.signals[S.xy.x].unit + "]"}}}, {displaylogo: false, responsive: true});
}

// ---- reference traces --------------------------------------------------------------------------------
function parseCapture(text, label) {  // a capture's CSV: tick,t,NAME...
  const lines = text.split(/\r?\n/).filter((l) => l.length);
  const head = (lines[0] || "").split(",");
  if (head[0] !== "tick" || head[1] !== "t" || head.length < 3) throw new Error(label + ": not a capture's CSV (tick,t,NAME...)");
  if (lines.length - 1 > MAX_REF_ROWS) throw new Error(`${label}: more than ${MAX_REF_ROWS} rows`);
  const ref = {label: label, ticks: [], t: [], x: [], cols: {}};
  const names = head.slice(2);
  for (const n of names) ref.cols[n] = [];
  for (let i = 1; i < lines.length; i++) {
    const v = lines[i].split(",");
    if (v.length !== head.length) throw new Error(`${label}: line ${i + 1} has ${v.length} fields, not ${head.length}`);
    ref.ticks.push(Number(v[0])); ref.t.push(Number(v[1]));
    names.forEach((n, k) => ref.cols[n].push(Number(v[k + 2])));
  }
  return ref;
}
function shiftRefs() { for (const r of S.refs) r.x = r.t.map((t) => t + S.offset); }
function addReference(ref) {
  S.refs.push(ref);
  while (S.refs.length > MAX_REFS) S.refs.shift();
  shiftRefs(); listRefs(); replot();
}
function listRefs() {
  $("reflist").innerHTML = S.refs.map((r, i) => `<div>${esc(r.label)}: ${r.t.length} rows of ${Object.keys(r.cols).map(esc).join(", ")}
    <button class="refdel" data-ref="${i}">x</button></div>`).join("");
}
T.referenceTraces = function (names, axisOf) {
  const out = [];
  for (const r of S.refs) for (const n of names) if (r.cols[n]) out.push({x: r.x, y: r.cols[n], customdata: r.ticks,
    name: `${n} (${r.label})`, type: "scatter", mode: "lines", line: {dash: "dash", width: 1}, opacity: 0.8, yaxis: axisOf(n)});
  return out;
};
function referenceFile(ev) {
  const f = ev.target.files[0];
  ev.target.value = "";
  if (!f) return;
  if (f.size > MAX_FILE_BYTES) { showError(`${f.name}: larger than ${MAX_FILE_BYTES >> 20} MB`); return; }
  f.text().then((text) => { addReference(parseCapture(text, f.name)); clearError(); }).catch((e) => showError(e.message));
}
async function referenceCapture(c) {
  try {
    const r = await fetch(c.url, {headers: auth()});
    if (!r.ok) throw new Error(`capture ${c.id}: ${r.status}`);
    addReference(parseCapture(await r.text(), "capture " + c.id));
  } catch (e) { showError(e.message); }
}
T.captureLinks = function (c, div) {  // beside a capture's CSV link: Parquet, MF4, and the capture as a reference
  for (const fmt of ["parquet", "mf4"]) {
    const a = document.createElement("a");
    a.href = c.url.replace(/\.csv$/, "." + fmt) + (TOKEN ? "?token=" + encodeURIComponent(TOKEN) : "");
    a.download = `capture-${c.id}.${fmt}`; a.textContent = fmt === "mf4" ? "MF4" : "Parquet"; a.className = "capfmt";
    div.append(", ", a);
  }
  const b = document.createElement("button");
  b.textContent = "as reference"; b.className = "capref"; b.onclick = () => referenceCapture(c);
  div.append(" ", b);
};

// ---- gauges and lamps --------------------------------------------------------------------------------
function gaugeState(g, v) {
  if (v === null || v === undefined) return "none";
  return (g.lo !== null && v < g.lo) || (g.hi !== null && v > g.hi) ? "alarm" : "ok";
}
function buildGauges() {
  $("gauges").innerHTML = S.gauges.map((g, i) => `<div class="gauge" data-gauge="${i}"><span class="lamp"></span>` +
    (g.kind === "gauge" ? `<span class="gbar"><div style="width: 0%"></div></span>` : "") +
    `<span>${esc(g.name)}</span><b class="gval">-</b><span>${esc(W.signals[g.name] ? W.signals[g.name].unit : "")}</span>` +
    `<span>${fmt(g.lo, 4)} .. ${fmt(g.hi, 4)}</span><button class="gdel" data-gauge="${i}">x</button></div>`).join("");
}
function addGauge() {
  const g = {name: $("gsignal").value, kind: $("gkind").value, lo: num("glo"), hi: num("ghi")};
  if (!W.signals[g.name]) return;
  if ((g.lo !== null && !isFinite(g.lo)) || (g.hi !== null && !isFinite(g.hi))) { showError("gauge: the limits are numbers"); return; }
  if (g.kind === "gauge" && (g.lo === null || g.hi === null || !(g.hi > g.lo))) { showError("gauge: set low < high (its scale)"); return; }
  if (g.kind === "lamp" && g.lo === null && g.hi === null) { showError("lamp: set a low or a high limit"); return; }
  if (S.gauges.length >= MAX_GAUGES) { showError(`at most ${MAX_GAUGES} gauges and lamps`); return; }
  clearError(); S.gauges.push(g); buildGauges(); subscribe(); dirty = true;
}
function gaugesNow() {
  W.gaugeStates = S.gauges.map((g, i) => {
    const v = last(g.name), st = gaugeState(g, v), el = document.querySelector(`.gauge[data-gauge="${i}"]`);
    if (el) {
      el.className = "gauge " + st;
      el.querySelector(".gval").textContent = fmt(v, 5);
      const bar = el.querySelector(".gbar div");
      if (bar && v !== null) bar.style.width = (100 * Math.min(1, Math.max(0, (v - g.lo) / (g.hi - g.lo)))).toFixed(1) + "%";
    }
    return {name: g.name, kind: g.kind, value: v, state: st};
  });
}

// ---- parameter sets ----------------------------------------------------------------------------------
async function listParamSets(select) {
  const rep = await api("/api/paramsets");
  const on = rep.ok && rep.folder;
  $("psetrow").style.display = on ? "" : "none";
  $("psetnote").textContent = on ? "" : "parameter sets: set parameter_sets = \"FOLDER\" in the [web] table";
  if (!on) return;
  $("psetlist").innerHTML = rep.layouts.map((n) => `<option>${esc(n)}</option>`).join("");
  if (select) $("psetlist").value = select;
}
async function saveParamSet() {
  const name = $("psetname").value.trim(), rep = await control({cmd: "get_params"});
  if (!rep.ok) { showError("get_params: " + rep.error.message); return; }
  const params = {};
  for (const [n, p] of Object.entries(rep.params)) params[n] = p.value;
  const saved = await api("/api/paramsets/" + encodeURIComponent(name), {version: 1, params: params});
  if (!saved.ok) { showError("parameter set: " + saved.error.message); return; }
  clearError(); await listParamSets(name);
}
async function compareParamSet() {  // the set's values beside the plant's: [{name, now, set, differs, known}]
  const name = $("psetlist").value, got = await api("/api/paramsets/" + encodeURIComponent(name));
  if (!got.ok) { showError("parameter set: " + got.error.message); return null; }
  const now = await control({cmd: "get_params"});
  if (!now.ok) { showError("get_params: " + now.error.message); return null; }
  const set = (got.layout && typeof got.layout.params === "object" && got.layout.params) || {};
  const rows = Object.entries(set).map(([n, v]) => { const p = now.params[n];
    return {name: n, now: p ? p.value : null, set: v, known: !!p, differs: !p || p.value !== v}; });
  W.paramCompare = {name: name, rows: rows};
  $("psettable").tHead.innerHTML = `<tr><th>parameter</th><th>now</th><th>in ${esc(name)}</th><th></th></tr>`;
  $("psettable").tBodies[0].innerHTML = rows.filter((r) => r.differs).map((r) =>
    `<tr class="differs" data-param="${esc(r.name)}"><td>${esc(r.name)}</td><td>${esc(fmt(r.now, 8))}</td><td>${esc(fmt(r.set, 8))}</td>` +
    `<td>${r.known ? "" : "not a parameter of this plant"}</td></tr>`).join("") ||
    `<tr><td colspan="4">the plant's ${rows.length} parameter(s) equal the set's</td></tr>`;
  return rows;
}
async function applyParamSet() {  // through set_params, as a ZeroMQ client: all or nothing; shows old and new
  const rows = await compareParamSet();
  if (!rows) return;
  const change = {};
  for (const r of rows) if (r.known && r.differs) change[r.name] = r.set;
  if (!Object.keys(change).length) { W.paramChange = []; return; }
  const rep = await act({cmd: "set_params", params: change});
  if (!rep.ok) return;
  const after = await control({cmd: "get_params"});
  W.paramChange = rows.filter((r) => r.name in change).map((r) => ({name: r.name, old: r.now, new: after.ok ? after.params[r.name].value : null}));
  $("psettable").tHead.innerHTML = `<tr><th>parameter</th><th>old</th><th>new</th><th></th></tr>`;
  $("psettable").tBodies[0].innerHTML = W.paramChange.map((c) => `<tr data-param="${esc(c.name)}"><td>${esc(c.name)}</td>` +
    `<td>${esc(fmt(c.old, 8))}</td><td>${esc(fmt(c.new, 8))}</td><td></td></tr>`).join("");
  loadParams();
}

// ---- layouts: the tools' part, and a layout as a file ------------------------------------------------
T.layoutPart = () => ({cursors: {a: S.cursor.a, b: S.cursor.b}, xy: {x: S.xy.x, y: S.xy.y},
                       gauges: S.gauges.map((g) => ({...g})), reference_offset_s: S.offset});
T.applyLayoutPart = function (l) {
  const n = (v) => typeof v === "number" && isFinite(v) ? v : null;
  if (l.cursors && typeof l.cursors === "object") {
    S.cursor = {a: n(l.cursors.a), b: n(l.cursors.b)};
    $("cura").value = S.cursor.a === null ? "" : S.cursor.a; $("curb").value = S.cursor.b === null ? "" : S.cursor.b;
  }
  if (l.xy && typeof l.xy === "object") {
    S.xy = {x: W.signals[l.xy.x] ? l.xy.x : "", y: typeof l.xy.y === "string" ? l.xy.y : ""};
    if (S.xy.x) $("xyx").value = S.xy.x;
    $("xyy").value = S.xy.y;
  }
  if (Array.isArray(l.gauges)) {
    S.gauges = l.gauges.filter((g) => g && W.signals[g.name] && (g.kind === "gauge" || g.kind === "lamp")).slice(0, MAX_GAUGES)
      .map((g) => ({name: g.name, kind: g.kind, lo: n(g.lo), hi: n(g.hi)}));
    buildGauges();
  }
  dirty = true;
  if (typeof l.reference_offset_s === "number") { S.offset = l.reference_offset_s; $("refoffset").value = S.offset; shiftRefs(); }
};
function exportLayout() {
  const text = JSON.stringify(currentLayout(), null, 1);
  W.exportedLayout = text;
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], {type: "application/json"}));
  a.download = (W.layout || "layout") + ".json";
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}
function importLayout(ev) {
  const f = ev.target.files[0];
  ev.target.value = "";
  if (!f) return;
  if (f.size > MAX_LAYOUT_BYTES) { showError(`${f.name}: larger than ${MAX_LAYOUT_BYTES >> 10} KB`); return; }
  f.text().then((text) => {
    const l = JSON.parse(text);
    if (!l || typeof l !== "object" || Array.isArray(l)) throw new Error("a layout is a JSON object");
    applyLayout(l); W.imported = f.name; clearError();
  }).catch((e) => showError(`${f.name}: ${e.message}`));
}

// ---- history from the server, and the recordings ----------------------------------------------------
// The server's rows go before the page's own (the page keeps its rows from the server's last tick on); hold grows to
// the seconds loaded, so they are kept; pause, then pan or zoom back over them.
async function loadHistory() {
  const secs = num("histsecs"), names = [...new Set(W.picked.concat(T.signals()))];
  if (!(secs > 0)) { showError("history: the seconds are a positive number"); return; }
  const every = W.rate && W.rate.every > 0 ? W.rate.every : 1;
  const rep = await api(`/api/history?seconds=${secs}&every=${every}&signals=${names.map(encodeURIComponent).join(",")}`);
  if (!rep.ok) { showError("history: " + rep.error.message); return; }
  const last = rep.tick.length ? rep.tick[rep.tick.length - 1] : -1;
  for (const n of names) {
    const d = W.data[n] || (W.data[n] = {t: [], y: [], tick: []}), v = rep.values[n];
    let k = 0;
    while (k < d.tick.length && d.tick[k] <= last) k++;
    if (k < d.tick.length && d.tick[k] < last) k = d.tick.length;  // the page's rows are of an earlier run: the server's win
    d.t = rep.t.concat(d.t.slice(k)); d.y = v.concat(d.y.slice(k)); d.tick = rep.tick.concat(d.tick.slice(k));
  }
  if ((parseFloat($("hold").value) || 0) < secs) $("hold").value = secs;
  W.history = {seconds: secs, rows: rep.tick.length, first_tick: rep.tick[0], last_tick: last, held_s: rep.held_s};
  $("histnote").textContent = rep.tick.length ? `${rep.tick.length} rows, ticks ${rep.tick[0]}..${last} (the server keeps ${rep.held_s} s)` : "no rows";
  clearError(); replot();
}
T.listRecordings = () => listRecordings();
async function listRecordings() {
  const rep = await api("/api/recordings"), tb = $("recordings").tBodies[0];
  if (!rep.ok) { showError("recordings: " + rep.error.message); return; }
  W.recordings = rep.recordings;
  const q = TOKEN ? "?token=" + encodeURIComponent(TOKEN) : "";
  tb.innerHTML = !rep.folder ? `<tr><td>no [recording] folder in the I/O config</td></tr>` : rep.recordings.map((r) =>
    `<tr data-recording="${esc(r.name)}"><td><a href="/api/recordings/${encodeURIComponent(r.name)}${q}" download="${esc(r.name)}">${esc(r.name)}</a></td>` +
    `<td>${fmt(r.bytes / 1e6, 4)} MB</td><td>${esc(new Date(r.mtime * 1000).toLocaleString())}</td></tr>`).join("");
}

// ---- once a frame, and the buttons ---------------------------------------------------------------------
T.frame = function () { cursorReadout(); drawXY(); gaugesNow(); };
document.addEventListener("click", async (ev) => {
  const b = ev.target, id = b.id;
  if (id === "curclear") { S.cursor = {a: null, b: null}; $("cura").value = ""; $("curb").value = ""; replot(); }
  else if (id === "xyshow") { S.xy = {x: $("xyx").value, y: $("xyy").value}; subscribe(); dirty = true; }
  else if (id === "xyclear") { S.xy = {x: "", y: ""}; $("xyy").value = ""; dirty = true; }
  else if (id === "refclear") { S.refs.length = 0; listRefs(); replot(); }
  else if (b.classList.contains("refdel")) { S.refs.splice(Number(b.dataset.ref), 1); listRefs(); replot(); }
  else if (id === "gadd") addGauge();
  else if (b.classList.contains("gdel")) { S.gauges.splice(Number(b.dataset.gauge), 1); buildGauges(); subscribe(); dirty = true; }
  else if (id === "psetsave") await saveParamSet();
  else if (id === "psetcompare") await compareParamSet();
  else if (id === "psetapply") await applyParamSet();
  else if (id === "layoutexport") exportLayout();
  else if (id === "histload") await loadHistory();
  else if (id === "reclist") await listRecordings();
});
})();
