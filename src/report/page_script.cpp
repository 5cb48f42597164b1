// The report page's style and script, kept apart from the C++ that assembles the page.
// The script draws every chart as SVG markup from the embedded metrics rows, so the same
// code draws the saved page and redraws the live one.
#include "report/page.h"

namespace trident::report {

const std::string& page_style() {
  static const std::string style = R"CSS(
body { font-family: sans-serif; margin: 1.5em; color: #222; background: #fafafa; }
h1 { margin: 0 0 .2em 0; } h2, h3 { font-size: 1em; margin: .3em 0; } h3 { font-weight: normal; }
.source, .none { color: #777; font-size: .9em; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 1em; }
section { background: white; border: 1px solid #ddd; padding: .6em; margin-bottom: 1em; }
#timeline { overflow-x: auto; }
table { border-collapse: collapse; font-size: .9em; }
td, th { padding: .15em .6em; text-align: right; } td:first-child, td:nth-child(2) { text-align: left; }
)CSS";
  return style;
}

const std::string& page_script() {
  static const std::string script = R"JS(
"use strict";
const metricsElement = document.getElementById("trident-metrics");

// The last row written for each iteration that has `key` (a resumed run re-logs iterations).
function lastPerIteration(rows, key) {
  const byIteration = new Map();
  for (const r of rows)
    if (typeof r[key] === "number" && typeof r.iteration === "number") byIteration.set(r.iteration, r);
  return [...byIteration.values()].sort((a, b) => a.iteration - b.iteration);
}
function lastWith(rows, key) {
  for (let i = rows.length - 1; i >= 0; --i) if (key in rows[i]) return rows[i];
  return null;
}
function format(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (Number.isInteger(v) && a < 1e6) return String(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(2);
  return a >= 100 ? v.toFixed(0) : v.toPrecision(3);
}
function escapeText(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
function ticks(lo, hi, n) {
  const step0 = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map(k => k * mag).find(s => s >= step0);
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(t);
  return out;
}
function range(values) {
  let lo = Math.min(...values), hi = Math.max(...values);
  if (lo === hi) { const d = Math.abs(lo) * 0.1 || 1; lo -= d; hi += d; }
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

// A line chart: each series is {name, cls, colour, points: [[x, y], ...]}; every point is a
// <circle class="point cls">.
function lineChart(series, xLabel) {
  const all = series.flatMap(s => s.points);
  if (all.length === 0) return '<p class="none">nothing logged yet</p>';
  const W = 460, H = 260, L = 62, R = 12, T = 22, B = 40;
  const [x0, x1] = range(all.map(p => p[0])), [y0, y1] = range(all.map(p => p[1]));
  const X = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const Y = y => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  let svg = `<svg width="${W}" height="${H}" font-size="11" font-family="sans-serif">`;
  svg += `<rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="white" stroke="#999"/>`;
  for (const t of ticks(x0, x1, 5))
    svg += `<line x1="${X(t)}" x2="${X(t)}" y1="${H - B}" y2="${H - B + 4}" stroke="#999"/>` +
           `<text x="${X(t)}" y="${H - B + 15}" text-anchor="middle">${format(t)}</text>`;
  for (const t of ticks(y0, y1, 5))
    svg += `<line x1="${L}" x2="${W - R}" y1="${Y(t)}" y2="${Y(t)}" stroke="#eee"/>` +
           `<text x="${L - 4}" y="${Y(t) + 4}" text-anchor="end">${format(t)}</text>`;
  svg += `<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle">${escapeText(xLabel)}</text>`;
  series.forEach((s, i) => {
    if (s.points.length === 0) return;
    svg += `<polyline class="line ${s.cls}" fill="none" stroke="${s.colour}" stroke-width="1.5" points="` +
           s.points.map(p => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(" ") + '"/>';
    for (const p of s.points)
      svg += `<circle class="point ${s.cls}" cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="2.5" ` +
             `fill="${s.colour}"><title>${escapeText(s.name)}: ${format(p[1])} at ${format(p[0])}</title></circle>`;
    svg += `<text x="${L + 150 * i}" y="${T - 8}" fill="${s.colour}">&#9679; ${escapeText(s.name)}</text>`;
  });
  return svg + "</svg>";
}

function series(rows, key, x, name, cls, colour) {
  return {name, cls, colour, points: lastPerIteration(rows, key).map(r => [x(r), r[key]])};
}

function drawCharts(rows) {
  const run = lastWith(rows, "run");
  const seq = run && run.run.seq_length;
  const tokens = r => seq ? r.consumed_samples * seq : r.consumed_samples;
  const iteration = r => r.iteration;
  const set = (id, html) => { document.getElementById(id).innerHTML = html; };
  const losses = x => [series(rows, "loss", x, "training loss", "train", "#1f77b4"),
                       series(rows, "validation_loss", x, "validation loss", "validation", "#d62728")];
  set("chart-loss-iterations", lineChart(losses(iteration), "iteration"));
  set("chart-loss-tokens", lineChart(losses(tokens), seq ? "tokens" : "samples (no sequence length logged)"));
  set("chart-lr", lineChart([series(rows, "lr", iteration, "learning rate", "lr", "#2ca02c")], "iteration"));
  set("chart-grad-norm", lineChart([series(rows, "grad_norm", iteration, "grad norm", "grad-norm", "#9467bd")], "iteration"));
  set("chart-tokens-per-s", lineChart([series(rows, "tokens_per_s", iteration, "tokens/s", "tokens-per-s", "#ff7f0e")], "iteration"));
  set("chart-mfu", lineChart([series(rows, "mfu", iteration, "MFU", "mfu", "#8c564b")], "iteration"));
}

function bytes(b) {
  if (b >= 1073741824) return (b / 1073741824).toFixed(2) + " GiB";
  if (b >= 1048576) return (b / 1048576).toFixed(1) + " MiB";
  return (b / 1024).toFixed(1) + " KiB";
}

// One bar per group (its total) followed by a bar per buffer, scaled to the plan's largest.
function drawMemoryPlan(rows) {
  const row = lastWith(rows, "memory_plan");
  const box = document.getElementById("memory-plan");
  if (!row) { box.innerHTML = '<p class="none">no memory plan in the metrics file</p>'; return; }
  let html = "";
  for (const plan of row.memory_plan) {
    const groups = new Map();
    for (const b of plan.buffers) groups.set(b.group, (groups.get(b.group) || 0) + b.bytes);
    const bars = [];
    for (const [group, total] of groups) {
      bars.push({label: group, bytes: total, cls: "group"});
      for (const b of plan.buffers)
        if (b.group === group)
          bars.push({label: b.copies > 1 ? `${b.name} x ${b.copies}` : b.name, bytes: b.bytes, cls: "buffer"});
    }
    const most = Math.max(1, ...bars.map(b => b.bytes)), H = 16, W = 800, L = 330;
    let svg = `<svg width="${W}" height="${bars.length * H + 6}" font-size="11" font-family="sans-serif">`;
    bars.forEach((b, i) => {
      const w = Math.max(1, b.bytes / most * (W - L - 90)), y = i * H + 3;
      const bold = b.cls === "group" ? ' font-weight="bold"' : "";
      svg += `<text x="${b.cls === "group" ? 4 : 16}" y="${y + 11}"${bold}>${escapeText(b.label)}</text>` +
             `<rect class="bar ${b.cls}" x="${L}" y="${y}" width="${w.toFixed(1)}" height="${H - 4}" ` +
             `fill="${b.cls === "group" ? "#6baed6" : "#c6dbef"}"/><text x="${L + w + 4}" y="${y + 11}">${bytes(b.bytes)}</text>`;
    });
    html += `<h3>${escapeText(plan.title)}: ${bytes(plan.buffers.reduce((s, b) => s + b.bytes, 0))}</h3>${svg}</svg>`;
  }
  box.innerHTML = html;
}

function drawCollectives(rows) {
  const row = lastWith(rows, "collectives");
  const box = document.getElementById("collectives");
  if (!row || !row.collectives) {
    box.innerHTML = '<p class="none">none yet: written at the end of the run</p>';
    return;
  }
  const n = Math.max(1, row.iterations || 1);
  const entries = [];
  for (const [group, kinds] of Object.entries(row.collectives))
    for (const [kind, e] of Object.entries(kinds)) entries.push({group, kind, e});
  const most = Math.max(1e-12, ...entries.map(x => x.e.seconds));
  let html = `<table><tr><th>group</th><th>kind</th><th>calls</th><th>MiB</th><th>ms in MPI</th><th></th></tr>`;
  for (const {group, kind, e} of entries)
    html += `<tr class="collective"><td>${escapeText(group)}</td><td>${escapeText(kind)}</td>` +
            `<td>${(e.calls / n).toFixed(1)}</td><td>${(e.bytes / 1048576 / n).toFixed(3)}</td>` +
            `<td>${(e.seconds * 1e3 / n).toFixed(2)}</td><td><svg width="160" height="10">` +
            `<rect x="0" y="1" height="8" width="${(e.seconds / most * 160).toFixed(1)}" fill="#fdae6b"/></svg></td></tr>`;
  box.innerHTML = html + `</table><p class="none">per iteration, over the ${n} iterations of the run</p>`;
}

function drawSummary(rows) {
  const train = lastPerIteration(rows, "loss"), valid = lastPerIteration(rows, "validation_loss");
  const run = lastWith(rows, "run");
  const parts = [];
  if (train.length) {
    const last = train[train.length - 1];
    parts.push(`iteration ${last.iteration}${run ? " of " + run.run.train_iters : ""}`,
               `loss ${format(last.loss)}`, `${format(last.tokens_per_s)} tokens/s`, `MFU ${format(last.mfu)}`);
  }
  if (valid.length) parts.push(`validation loss ${format(valid[valid.length - 1].validation_loss)}`);
  // The layout as the grid print names it (process_grid.h): t x c x d x p ranks.
  if (run && run.run.tensor)
    parts.push(`t ${run.run.tensor} × c ${run.run.context ?? 1} × d ${run.run.data} × p ${run.run.pipeline}`);
  if (document.body.dataset.live === "1") parts.push("live, updated " + new Date().toLocaleTimeString());
  document.getElementById("summary").textContent = parts.join(" · ") || "nothing logged yet";
}

function draw() {
  const rows = JSON.parse(metricsElement.textContent);
  drawCharts(rows);
  drawMemoryPlan(rows);
  drawCollectives(rows);
  drawSummary(rows);
}

// Served live: the same rows from metrics.json, redrawn when they change; the timeline once
// the run has written it.
async function poll() {
  try {
    const answer = await fetch("metrics.json", {cache: "no-store"});
    const text = await answer.text();
    if (answer.ok && text !== metricsElement.textContent) metricsElement.textContent = text;
    draw();
    const figure = await fetch("timeline", {cache: "no-store"});
    const svg = await figure.text();
    const box = document.getElementById("timeline");
    if (figure.ok && svg && svg !== box.dataset.drawn) { box.innerHTML = svg; box.dataset.drawn = svg; }
  } catch (e) {
    document.getElementById("summary").textContent += " · not reachable: " + e;
  }
}

draw();
if (document.body.dataset.live === "1") setInterval(poll, 2000);
)JS";
  return script;
}

}  // namespace trident::report
