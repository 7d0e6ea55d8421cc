// The live time plots' renderer, loaded by workspace.html before the tools.  Plotly relays out its axes, legend and
// SVG at every redraw (about 40 ms for a plot of 7 traces in headless Chromium: most of the page's CPU time); a live
// plot only needs its lines drawn again.  stripChart(div, traces, layout) takes the same traces and layout the page
// would hand to Plotly.react and draws them on one opaque canvas: for each trace, per pixel column, the first, lowest,
// highest and last value of the rows in that column (every peak stays visible however many rows fall on a pixel),
// the axes with their ticks, the legend and the cursors' lines.  It keeps Plotly's face for the rest of the page:
// div.data and div.layout are what it drew, div.on(event, fn) and div.emit(event, data) carry plotly_click and
// plotly_hover (with {points: [{x}]}, x the run time at the mouse).  The paused plots (pan, zoom, hover over the
// history held) and the XY plot stay Plotly's.
"use strict";
(function () {
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const FONT = "11px system-ui, sans-serif", AXIS_W = 42;

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
  new ResizeObserver(() => { if (div._strip === s) { fit(); if (div.data) draw(div); } }).observe(div);
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
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i];
    if (x < x0) continue;
    if (x > x1) break;
    const y = ys[i];
    if (y === null) continue;
    if (y < lo) lo = y;
    if (y > hi) hi = y;
  }
  return [lo, hi];
}

// one trace as vertical strokes per pixel column: first, min, max, last of the rows in that column
function line(ctx, xs, ys, fx, fy, x0, x1) {
  let col = null, first = 0, mn = 0, mx = 0, lastY = 0, open = false;
  const flush = () => { if (col === null) return;
    if (!open) { ctx.moveTo(col, fy(first)); open = true; } else ctx.lineTo(col, fy(first));
    if (mn !== mx) { ctx.lineTo(col, fy(mn)); ctx.lineTo(col, fy(mx)); }
    ctx.lineTo(col, fy(lastY)); };
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i];
    if (x < x0) continue;
    if (x > x1) break;
    const y = ys[i];
    if (y === null) { flush(); col = null; open = false; continue; }  // a non-finite value breaks the line
    const c = Math.round(fx(x));
    if (c !== col) { flush(); col = c; first = mn = mx = lastY = y; }
    else { if (y < mn) mn = y; if (y > mx) mx = y; lastY = y; }
  }
  flush();
}

function draw(div) {
  const s = div._strip, traces = div.data, layout = div.layout, ctx = s.ctx, W = s.w, H = s.h;
  const axes = [...new Set(traces.map((t) => t.yaxis || "y"))].sort((a, b) => (a === "y" ? 0 : +a.slice(1)) - (b === "y" ? 0 : +b.slice(1)));
  const nRight = Math.max(0, axes.length - 1);
  const a = {l: 8 + AXIS_W, r: W - 8 - AXIS_W * nRight, t: 22, b: H - 30};
  let x0 = Infinity, x1 = -Infinity;
  if (layout.xaxis && Array.isArray(layout.xaxis.range)) [x0, x1] = layout.xaxis.range;
  else for (const t of traces) if (t.x.length) { x0 = Math.min(x0, t.x[0]); x1 = Math.max(x1, t.x[t.x.length - 1]); }
  if (!isFinite(x0)) { x0 = 0; x1 = 1; } else if (x1 <= x0) x1 = x0 + 1e-3;
  Object.assign(a, {x0: x0, x1: x1});
  s.area = a;
  const fx = (x) => a.l + (x - x0) / (x1 - x0) * (a.r - a.l);
  const ranges = {};
  for (const ax of axes) {
    const spec = layout[axisKey(ax)] || {};
    if (Array.isArray(spec.range)) { ranges[ax] = spec.range.slice(); continue; }
    let lo = Infinity, hi = -Infinity;
    for (const t of traces) if ((t.yaxis || "y") === ax) { const [l, h] = extent(t.x, t.y, x0, x1); lo = Math.min(lo, l); hi = Math.max(hi, h); }
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    const pad = hi > lo ? 0.05 * (hi - lo) : Math.max(1, Math.abs(lo)) * 0.05;
    ranges[ax] = [lo - pad, hi + pad];
  }
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
  ctx.font = FONT; ctx.lineWidth = 1;
  // x axis: grid and labels
  ctx.strokeStyle = "#eee"; ctx.fillStyle = "#444"; ctx.textAlign = "center"; ctx.textBaseline = "top";
  ctx.beginPath();
  for (const v of ticks(x0, x1, Math.max(2, Math.floor((a.r - a.l) / 90)))) { const px = Math.round(fx(v)) + 0.5; ctx.moveTo(px, a.t); ctx.lineTo(px, a.b); ctx.fillText(label(v), px, a.b + 4); }
  ctx.stroke();
  ctx.fillText((layout.xaxis && layout.xaxis.title && layout.xaxis.title.text) || "", (a.l + a.r) / 2, a.b + 16);
  // y axes: the first on the left with the grid, the others on the right, each further one set off outwards
  axes.forEach((ax, j) => {
    const [lo, hi] = ranges[ax], spec = layout[axisKey(ax)] || {}, fy = (y) => a.b - (y - lo) / (hi - lo) * (a.b - a.t);
    const xAxis = j === 0 ? a.l : a.r + AXIS_W * (j - 1);
    const vals = spec.tickvals || ticks(lo, hi, Math.max(2, Math.floor((a.b - a.t) / 40)));
    ctx.textAlign = j === 0 ? "right" : "left"; ctx.textBaseline = "middle"; ctx.fillStyle = j < COLORS.length && axes.length > 1 ? COLORS[j] : "#444";
    ctx.strokeStyle = j === 0 ? "#eee" : "#ccc";
    ctx.beginPath();
    vals.forEach((v, i) => { if (v < lo || v > hi) return; const py = Math.round(fy(v)) + 0.5;
      if (j === 0) { ctx.moveTo(a.l, py); ctx.lineTo(a.r, py); } else { ctx.moveTo(xAxis, py); ctx.lineTo(xAxis + 4, py); }
      ctx.fillText(spec.ticktext ? spec.ticktext[i] : label(v), j === 0 ? a.l - 4 : xAxis + 6, py); });
    ctx.stroke();
    ctx.save(); ctx.translate(j === 0 ? 9 : Math.min(W - 4, xAxis + AXIS_W - 4), (a.t + a.b) / 2); ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center"; ctx.textBaseline = "middle"; ctx.fillText((spec.title && spec.title.text) || "", 0, 0); ctx.restore();
  });
  ctx.strokeStyle = "#999"; ctx.strokeRect(a.l + 0.5, a.t + 0.5, a.r - a.l, a.b - a.t);
  // the traces, clipped to the plot area
  ctx.save(); ctx.beginPath(); ctx.rect(a.l, a.t, a.r - a.l, a.b - a.t); ctx.clip();
  traces.forEach((t, i) => {
    const [lo, hi] = ranges[t.yaxis || "y"], fy = (y) => a.b - (y - lo) / (hi - lo) * (a.b - a.t);
    ctx.strokeStyle = (t.line && t.line.color) || COLORS[i % COLORS.length];
    ctx.lineWidth = (t.line && t.line.width) || 1.5;
    ctx.setLineDash(t.line && t.line.dash === "dash" ? [6, 4] : []);
    ctx.globalAlpha = t.opacity || 1;
    ctx.beginPath(); line(ctx, t.x, t.y, fx, fy, x0, x1); ctx.stroke();
  });
  ctx.globalAlpha = 1;
  for (const sh of layout.shapes || []) {  // the cursors
    if (sh.x0 < x0 || sh.x0 > x1) continue;
    ctx.strokeStyle = (sh.line && sh.line.color) || "#333"; ctx.lineWidth = 1; ctx.setLineDash([2, 3]);
    const px = Math.round(fx(sh.x0)) + 0.5; ctx.beginPath(); ctx.moveTo(px, a.t); ctx.lineTo(px, a.b); ctx.stroke();
  }
  ctx.setLineDash([]); ctx.restore();
  // the legend, one line above the plot
  if (layout.showlegend !== false) {
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

// the page's entry: draw traces and layout (Plotly's shapes) on the div's canvas
window.stripChart = function (div, traces, layout) {
  canvasOf(div);
  div.data = traces; div.layout = layout;
  draw(div);
};
window.stripChart.release = release;
})();
