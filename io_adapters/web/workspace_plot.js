// The live time plots' renderer, loaded by workspace.html before the tools.  Plotly relays out its axes, legend and
// SVG at every redraw (about 40 ms for a plot of 7 traces in headless Chromium: most of the page's CPU time); a live
// plot only needs its lines drawn again.  stripChart(div, traces, layout) takes the same traces and layout the page
// would hand to Plotly.react and draws them on one opaque canvas: for each trace, per pixel column, the first, lowest,
// highest and last value of the rows in that column (every peak stays visible however many rows fall on a pixel),
// the axes with their ticks, the legend and the cursors' lines.  It keeps Plotly's face for the rest of the page:
// div.data and div.layout are what it drew, div.on(event, fn) and div.emit(event, data) carry plotly_click and
// plotly_hover (with {points: [{x}]}, x the run time at the mouse).  The paused plots (pan, zoom, hover over the
// history held) and the XY plot stay Plotly's.  A plot off the screen is not drawn until it is back on it.
// A live plot scrolls: a pixel column is a fixed slice of run time, so while the window, the size, the signals and
// the y axes stay, a redraw moves the image left by whole columns and draws only the new ones (and the x labels);
// a y axis stays while its signals fit in it and a fit would not be under half as tall.  Anything else draws the
// whole plot.  div._strip.full and .scrolled count the two kinds of redraw.
"use strict";
(function () {
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const FONT = "11px system-ui, sans-serif", AXIS_W = 42;
// ?scroll=0: every redraw draws the whole plot, as before the scrolling (bench/bench_workspace_pages.py's A/B)
const SCROLL = new URLSearchParams(location.search).get("scroll") !== "0";

// about n "nice" ticks (1, 2, 5 times a power of ten) from lo to hi
function ticks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, n), p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
  const step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p, out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}
const label = (v) => String(+v.toPrecision(6));
const axisKey = (a) => !a || a === "y" ? "yaxis" : "yaxis" + a.slice(1);

// the canvas of a div, made once; its size follows the div through a ResizeObserver (no layout read per draw)
function canvasOf(div) {
  if (div._strip) return div._strip;
  if (div._fullLayout && window.Plotly) Plotly.purge(div);  // was drawn by Plotly (paused): its SVG goes
  div.textContent = "";
  const c = document.createElement("canvas"), s = {canvas: c, ctx: c.getContext("2d", {alpha: false}), w: 0, h: 0, area: null, listeners: {}};
  c.style.display = "block";
  div.appendChild(c);
  div._strip = s;
  const fit = () => { s.w = Math.max(50, div.clientWidth); s.h = Math.max(50, div.clientHeight); c.width = s.w; c.height = s.h; s.stale = true; };
  fit();
  new ResizeObserver(() => {
    if (div._strip !== s) return;
    fit();
    if (div.data) { if (s.onScreen) draw(div); else s.skipped = true; }
  }).observe(div);
  // a plot off the screen is not drawn (its drawing and its changed canvas would still cost the browser at every
  // frame); back on the screen it is drawn whole at once, and stripChart.onShow (the page's replot) asks for the
  // newest rows
  s.onScreen = true;  // until the observer says otherwise (its first report comes after the first frame)
  new IntersectionObserver((es) => {
    if (div._strip !== s) return;
    s.onScreen = es[es.length - 1].isIntersecting;
    if (s.onScreen && s.skipped) { s.skipped = false; if (div.data) draw(div); if (window.stripChart.onShow) window.stripChart.onShow(div); }
  }).observe(div);
  div.on = (ev, fn) => { (s.listeners[ev] = s.listeners[ev] || []).push(fn); };
  div.emit = (ev, data) => { for (const fn of s.listeners[ev] || []) fn(data); };
  const xAt = (ev) => { const a = s.area; if (!a) return null; const px = ev.offsetX;
    return px < a.l || px > a.r ? null : a.x0 + (px - a.l) / (a.r - a.l) * (a.x1 - a.x0); };
  c.addEventListener("click", (ev) => { const x = xAt(ev); if (x !== null) div.emit("plotly_click", {points: [{x: x}]}); });
  let hoverPending = false;
  c.addEventListener("mousemove", (ev) => {  // at most once a frame
    if (hoverPending) return;
    hoverPending = true;
    requestAnimationFrame(() => { hoverPending = false; const x = xAt(ev); if (x !== null) div.emit("plotly_hover", {points: [{x: x}]}); });
  });
  return s;
}
// back to Plotly (paused): the canvas and its events go
function release(div) {
  if (!div._strip) return;
  div._strip = null;
  div.textContent = "";
  delete div.data; delete div.layout; delete div.on; delete div.emit;
}

function extent(xs, ys, x0, x1) {  // [min, max] of ys where xs is within x0..x1 (xs ascending)
  let lo = Infinity, hi = -Infinity;
  for (let i = firstAt(xs, x0); i < xs.length; i++) {
    const x = xs[i];
    if (x > x1) break;
    const y = ys[i];
    if (y === null) continue;
    if (y < lo) lo = y;
    if (y > hi) hi = y;
  }
  return [lo, hi];
}
function firstAt(xs, x) { let lo = 0, hi = xs.length; while (lo < hi) { const m = (lo + hi) >> 1; if (xs[m] < x) lo = m + 1; else hi = m; } return lo; }

// One trace as vertical strokes per pixel column: the first, lowest, highest and last value of the rows in that
// column.  A column is a fixed slice of run time (g.colOf: floor(t / seconds per pixel)), so a column drawn once
// holds the same rows when the plot has scrolled on: the scroll moves the image by whole columns and draws only
// the columns that are new (and the one that was the newest, which may have got more rows since).
function line(ctx, xs, ys, g, fy, xFrom) {
  let col = null, first = 0, mn = 0, mx = 0, lastY = 0, open = false;
  const flush = () => { if (col === null) return;
    if (!open) { ctx.moveTo(col, fy(first)); open = true; } else ctx.lineTo(col, fy(first));
    if (mn !== mx) { ctx.lineTo(col, fy(mn)); ctx.lineTo(col, fy(mx)); }
    ctx.lineTo(col, fy(lastY)); };
  for (let i = firstAt(xs, xFrom); i < xs.length; i++) {
    const x = xs[i];
    if (x > g.x1) break;
    const y = ys[i];
    if (y === null) { flush(); col = null; open = false; continue; }  // a non-finite value breaks the line
    const c = g.px(x);
    if (c !== col) { flush(); col = c; first = mn = mx = lastY = y; }
    else { if (y < mn) mn = y; if (y > mx) mx = y; lastY = y; }
  }
  flush();
}

// the plot's geometry: its area, the x range on whole pixel columns, the y axes
function geometry(s, traces, layout) {
  const W = s.w, H = s.h;
  const axes = [...new Set(traces.map((t) => t.yaxis || "y"))].sort((a, b) => (a === "y" ? 0 : +a.slice(1)) - (b === "y" ? 0 : +b.slice(1)));
  const a = {l: 8 + AXIS_W, r: W - 8 - AXIS_W * Math.max(0, axes.length - 1), t: 22, b: H - 30};
  let x0 = Infinity, x1 = -Infinity;
  if (layout.xaxis && Array.isArray(layout.xaxis.range)) [x0, x1] = layout.xaxis.range;
  else for (const t of traces) if (t.x.length) { x0 = Math.min(x0, t.x[0]); x1 = Math.max(x1, t.x[t.x.length - 1]); }
  if (!isFinite(x0)) { x0 = 0; x1 = 1; } else if (x1 <= x0) x1 = x0 + 1e-3;
  const cols = Math.max(1, a.r - a.l), prev = s.prev;
  // seconds per pixel column: the previous plot's while the span is the same (a float difference may differ in its
  // last bits from one draw to the next; the columns must not)
  const span = x1 - x0, dt = prev && Math.abs(prev.span - span) <= 1e-6 * span ? prev.dt : span / cols;
  const cR = Math.floor(x1 / dt), cBase = cR - cols + 1;  // the newest column at the right edge
  const g = {a: a, axes: axes, x0: (cBase) * dt, x1: x1, span: prev && prev.dt === dt ? prev.span : span, dt: dt, cR: cR, cBase: cBase,
             px: (x) => a.l + Math.floor(x / dt) - cBase, fx: (x) => a.l + (x / dt - cBase)};
  g.ranges = {};
  for (const ax of axes) {
    const spec = layout[axisKey(ax)] || {};
    if (Array.isArray(spec.range)) { g.ranges[ax] = spec.range.slice(); continue; }
    let lo = Infinity, hi = -Infinity;
    for (const t of traces) if ((t.yaxis || "y") === ax) { const [l, h] = extent(t.x, t.y, g.x0, x1); lo = Math.min(lo, l); hi = Math.max(hi, h); }
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    // the axis stays while what it shows fits in it and a fit would not be under half as tall: a scroll then draws
    // only the new columns (an axis fitted at every draw would redraw the whole plot at every draw)
    const pad = hi > lo ? 0.05 * (hi - lo) : Math.max(1, Math.abs(lo)) * 0.05, old = prev && prev.ranges[ax];
    g.ranges[ax] = old && lo >= old[0] && hi <= old[1] && hi - lo + 2 * pad >= 0.5 * (old[1] - old[0]) ? old : [lo - pad, hi + pad];
  }
  return g;
}

// what the image depends on besides the rows: a change of any of it draws the whole plot
function keyOf(s, g, traces, layout) {
  return JSON.stringify([s.w, s.h, g.dt, g.ranges, traces.map((t) => [t.name, t.yaxis, t.line, t.opacity]), layout.shapes,
    layout.showlegend, layout.xaxis && layout.xaxis.title, g.axes.map((ax) => { const sp = layout[axisKey(ax)] || {};
      return [sp.title, sp.tickvals, sp.ticktext]; })]);
}
const yOf = (g, ax) => { const [lo, hi] = g.ranges[ax], a = g.a; return (y) => a.b - (y - lo) / (hi - lo) * (a.b - a.t); };

// the grid, the traces and the cursors in the plot area from pixel column xL on (the caller clips); the traces from
// the rows at run time xFrom on
function area(ctx, g, traces, layout, xL, xFrom) {
  const a = g.a;
  ctx.fillStyle = "#fff"; ctx.fillRect(xL, a.t, a.r - xL, a.b - a.t);
  ctx.lineWidth = 1; ctx.strokeStyle = "#eee"; ctx.setLineDash([]);
  ctx.beginPath();
  for (const v of g.xticks) { const px = Math.round(g.fx(v)) + 0.5; if (px >= xL) { ctx.moveTo(px, a.t); ctx.lineTo(px, a.b); } }
  const fy0 = g.axes.length ? yOf(g, g.axes[0]) : null;
  for (const v of fy0 ? g.yticks || [] : []) { const py = Math.round(fy0(v)) + 0.5; ctx.moveTo(xL, py); ctx.lineTo(a.r, py); }
  ctx.stroke();
  traces.forEach((t, i) => {
    ctx.strokeStyle = (t.line && t.line.color) || COLORS[i % COLORS.length];
    ctx.lineWidth = (t.line && t.line.width) || 1.5;
    ctx.setLineDash(t.line && t.line.dash === "dash" ? [6, 4] : []);
    ctx.globalAlpha = t.opacity || 1;
    ctx.beginPath(); line(ctx, t.x, t.y, g, yOf(g, t.yaxis || "y"), xFrom); ctx.stroke();
  });
  ctx.globalAlpha = 1;
  for (const sh of layout.shapes || []) {  // the cursors
    const px = Math.round(g.fx(sh.x0)) + 0.5;
    if (px < xL || px > a.r) continue;
    ctx.strokeStyle = (sh.line && sh.line.color) || "#333"; ctx.lineWidth = 1; ctx.setLineDash([2, 3]);
    ctx.beginPath(); ctx.moveTo(px, a.t); ctx.lineTo(px, a.b); ctx.stroke();
  }
  ctx.setLineDash([]);
}
// the x axis's labels and title below the plot area (only labels wholly above the area: the band is redrawn alone)
function xLabels(ctx, g, layout) {
  const a = g.a;
  ctx.fillStyle = "#fff"; ctx.fillRect(a.l, a.b + 1, a.r - a.l, g.h - a.b - 1);
  ctx.fillStyle = "#444"; ctx.textAlign = "center"; ctx.textBaseline = "top"; ctx.font = FONT;
  for (const v of g.xticks) {
    const px = Math.round(g.fx(v)) + 0.5, text = label(v), half = ctx.measureText(text).width / 2;
    if (px - half >= a.l && px + half <= a.r) ctx.fillText(text, px, a.b + 4);
  }
  ctx.fillText((layout.xaxis && layout.xaxis.title && layout.xaxis.title.text) || "", (a.l + a.r) / 2, a.b + 16);
}
function border(ctx, a) { ctx.lineWidth = 1; ctx.setLineDash([]); ctx.strokeStyle = "#999"; ctx.strokeRect(a.l + 0.5, a.t + 0.5, a.r - a.l, a.b - a.t); }

// the whole plot: axes, legend, area
function full(s, g, traces, layout) {
  const ctx = s.ctx, a = g.a, W = s.w;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, s.h);
  ctx.font = FONT; ctx.lineWidth = 1;
  // y axes: the first on the left with the grid, the others on the right, each further one set off outwards
  g.axes.forEach((ax, j) => {
    const [lo, hi] = g.ranges[ax], spec = layout[axisKey(ax)] || {}, fy = yOf(g, ax);
    const xAxis = j === 0 ? a.l : a.r + AXIS_W * (j - 1);
    const vals = spec.tickvals || ticks(lo, hi, Math.max(2, Math.floor((a.b - a.t) / 40)));
    if (j === 0) g.yticks = vals.filter((v) => v >= lo && v <= hi);
    ctx.textAlign = j === 0 ? "right" : "left"; ctx.textBaseline = "middle"; ctx.fillStyle = j < COLORS.length && g.axes.length > 1 ? COLORS[j] : "#444";
    ctx.strokeStyle = "#ccc";
    ctx.beginPath();
    vals.forEach((v, i) => { if (v < lo || v > hi) return; const py = Math.round(fy(v)) + 0.5;
      if (j) { ctx.moveTo(xAxis, py); ctx.lineTo(xAxis + 4, py); }
      ctx.fillText(spec.ticktext ? spec.ticktext[i] : label(v), j === 0 ? a.l - 4 : xAxis + 6, py); });
    ctx.stroke();
    ctx.save(); ctx.translate(j === 0 ? 9 : Math.min(W - 4, xAxis + AXIS_W - 4), (a.t + a.b) / 2); ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center"; ctx.textBaseline = "middle"; ctx.fillText((spec.title && spec.title.text) || "", 0, 0); ctx.restore();
  });
  ctx.save(); ctx.beginPath(); ctx.rect(a.l, a.t, a.r - a.l, a.b - a.t); ctx.clip();
  area(ctx, g, traces, layout, a.l, g.x0 - g.dt);
  ctx.restore();
  border(ctx, a);
  xLabels(ctx, g, layout);
  if (layout.showlegend !== false) {  // the legend, one line above the plot
    let px = a.l;
    ctx.textAlign = "left"; ctx.textBaseline = "middle";
    traces.forEach((t, i) => {
      const w = ctx.measureText(t.name).width;
      if (px + 24 + w > W) return;
      ctx.strokeStyle = (t.line && t.line.color) || COLORS[i % COLORS.length]; ctx.lineWidth = 2;
      ctx.beginPath(); ctx.moveTo(px, 11); ctx.lineTo(px + 16, 11); ctx.stroke();
      ctx.fillStyle = "#333"; ctx.fillText(t.name, px + 20, 11);
      px += 32 + w;
    });
  }
}
// the plot scrolled on by `shift` columns: the image moved left, then the two newest columns before it (the newest
// may have got rows since; its stroke reaches into the one before) and the new ones drawn, and the x labels
function scroll(s, g, traces, layout, prev, shift) {
  const ctx = s.ctx, a = g.a, cols = a.r - a.l, h = a.b - a.t;
  if (shift) ctx.drawImage(s.canvas, a.l + shift, a.t, cols - shift, h, a.l, a.t, cols - shift, h);
  const xL = Math.max(a.l, a.l + (prev.cR - 1 - g.cBase));
  ctx.save(); ctx.beginPath(); ctx.rect(xL, a.t, a.r - xL, h); ctx.clip();
  area(ctx, g, traces, layout, xL, (prev.cR - 2) * g.dt);
  ctx.restore();
  border(ctx, a);
  xLabels(ctx, g, layout);
}

function draw(div) {
  const s = div._strip, traces = div.data, layout = div.layout;
  const sig = traces.map((t) => t.name + "|" + (t.yaxis || "y")).join("\n");
  if (s.prev && s.prev.sig !== sig) s.prev = null;  // other signals: their axes are fitted anew
  const g = geometry(s, traces, layout), prev = s.prev, cols = g.a.r - g.a.l;
  g.sig = sig; g.h = s.h;
  g.xticks = ticks(g.x0, g.x1, Math.max(2, Math.floor(cols / 90)));
  g.key = keyOf(s, g, traces, layout);
  const shift = prev ? g.cR - prev.cR : -1;
  if (SCROLL && prev && !s.stale && prev.key === g.key && shift >= 0 && shift < cols - 2 && !traces.some((t) => t.line && t.line.dash)) {
    g.yticks = prev.yticks;
    scroll(s, g, traces, layout, prev, shift);
    s.scrolled = (s.scrolled || 0) + 1;
  } else {
    full(s, g, traces, layout);
    s.full = (s.full || 0) + 1;
  }
  s.prev = g; s.stale = false;
  s.area = {l: g.a.l, r: g.a.r, x0: g.cBase * g.dt, x1: (g.cBase + cols) * g.dt};
}

// the page's entry: draw traces and layout (Plotly's shapes) on the div's canvas
window.stripChart = function (div, traces, layout) {
  const s = canvasOf(div);
  div.data = traces; div.layout = layout;
  if (!s.onScreen) { s.skipped = true; s.stale = true; s.offScreen = (s.offScreen || 0) + 1; return; }
  draw(div);
};
window.stripChart.release = release;
// false while the div's canvas is off the screen (the page then need not even make its traces)
window.stripChart.shown = (div) => !div._strip || div._strip.onScreen;
})();
