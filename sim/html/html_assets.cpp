// The inline assets of every page: the stylesheet and the heatmap script. Written here, fetched
// from nowhere.
#include "sim/html/heatmap.h"
#include "sim/html/html_doc.h"

namespace probelab::html {

std::string_view page_style() {
  return R"css(:root { --fg: #1f2933; --muted: #616e7c; --line: #d9e2ec; --bg: #ffffff; --panel: #f5f7fa;
  --ok: #1e7b34; --fail: #b42318; --warn: #b54708; --src: #d64545; --prop: #f0a030; --carrier: #8e44ad;
  --path: #9aa5b1; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif;
  color: var(--fg); background: var(--bg); }
header { padding: 14px 24px 10px; border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 20px; }
header p { margin: 2px 0; color: var(--muted); }
nav { position: sticky; top: 0; z-index: 2; background: var(--panel); border-bottom: 1px solid var(--line);
  padding: 6px 24px; display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 13px; }
nav a { color: #1f5fa8; text-decoration: none; }
main { padding: 4px 24px 40px; max-width: 1400px; }
section { margin: 18px 0 26px; }
h2 { font-size: 17px; margin: 0 0 8px; padding-bottom: 3px; border-bottom: 1px solid var(--line); }
h3 { font-size: 14px; margin: 14px 0 6px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: var(--panel); font-weight: 600; white-space: nowrap; }
table.records td { white-space: nowrap; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.fail td { background: #fef3f2; }
tr.source td:first-child { border-left: 4px solid var(--src); }
tr.propagation td:first-child { border-left: 4px solid var(--prop); }
tr.carrier td:first-child { border-left: 4px solid var(--carrier); }
.scroll { overflow-x: auto; max-width: 100%; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; font-weight: 600;
  color: #fff; background: var(--path); }
.badge.ok { background: var(--ok); } .badge.fail { background: var(--fail); } .badge.warn { background: var(--warn); }
.badge.source { background: var(--src); } .badge.propagation { background: var(--prop); }
.badge.carrier { background: var(--carrier); }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; }
.note { color: var(--muted); margin: 6px 0; }
.error { border: 1px solid var(--fail); background: #fef3f2; padding: 8px 12px; border-radius: 4px; }
.bar { display: inline-block; height: 10px; background: #5b8def; vertical-align: middle; }
.bar.probe { background: #f0a030; }
.cand { border: 1px solid var(--line); border-radius: 4px; padding: 8px 12px; margin: 8px 0; }
.cand h3 { margin: 0 0 4px; }
.cand ul { margin: 4px 0; padding-left: 20px; }
.score { display: inline-block; width: 80px; height: 8px; background: var(--line); vertical-align: middle; }
.score span { display: block; height: 8px; background: var(--src); }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; color: var(--muted); }
.legend i { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px;
  border: 1px solid rgba(0,0,0,.25); }
.hm-controls { margin: 4px 0; font-size: 13px; } .hm-controls select { margin-right: 8px; }
.hm-readout { color: var(--muted); font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
.hm-legend { font-size: 12px; color: var(--muted); margin-top: 4px; }
.ci { position: relative; display: inline-block; width: 70px; height: 10px; background: #eef2f6; vertical-align: middle; }
.ci-b { position: absolute; left: 0; top: 1px; height: 8px; }
.ci-w { position: absolute; top: 4px; height: 2px; background: #1f2933; }
table.groups td { white-space: nowrap; }
svg text { font-family: system-ui, sans-serif; }
)css";
}

std::string_view heatmap_script() {
  return R"js((function () {
  "use strict";
  var RAMP = [[255, 247, 204], [254, 196, 79], [240, 59, 32], [127, 0, 0]];
  var C_ZERO = "#f1f5f9", C_NONE = "#d5dbe1", C_NAN = "#7b3294", C_INF = "#111111", C_REF = "#9ecae1";
  function ramp(t) {
    t = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
    var i = Math.min(RAMP.length - 2, Math.floor(t)), f = t - i, a = RAMP[i], b = RAMP[i + 1];
    return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); }).join(",") + ")";
  }
  function fmt(v) {
    if (v === null || v === undefined) return "no data";
    if (typeof v === "string") return v;
    if (v === 0) return "0";
    return Math.abs(v) >= 1e4 || Math.abs(v) < 1e-3 ? v.toExponential(2) : String(+v.toPrecision(3));
  }
  function swatch(color, label) {
    return '<span class="legend"><span><i style="background:' + color + '"></i>' + label + "</span></span>";
  }
  function setup(box) {
    var el = document.getElementById(box.getAttribute("data-heatmap"));
    if (!el) return;
    var d = JSON.parse(el.textContent);
    var canvas = box.querySelector(".hm-canvas"), out = box.querySelector(".hm-readout");
    var selM = box.querySelector(".hm-metric"), selV = box.querySelector(".hm-view");
    var legend = box.querySelector(".hm-legend");
    d.metrics.forEach(function (m, i) { selM.add(new Option(m.label, String(i))); });
    d.views.forEach(function (v, i) { selV.add(new Option(v.label, String(i))); });
    selM.disabled = d.metrics.length < 2;
    selV.disabled = d.views.length < 2;
    var R = d.rows.length, C = d.cols.length;
    var cw = Math.max(3, Math.min(28, Math.floor(1000 / C))), ch = Math.max(3, Math.min(20, Math.floor(560 / R)));
    var ctx = canvas.getContext("2d");
    ctx.font = "11px system-ui, sans-serif";
    var left = 8, top = 8;
    d.rows.forEach(function (r) { left = Math.max(left, ctx.measureText(r).width + 10); });
    var colLab = 0;
    d.cols.forEach(function (c) { colLab = Math.max(colLab, ctx.measureText(c).width); });
    top = Math.min(170, colLab) + 12;
    var rstep = Math.ceil(12 / ch), cstep = Math.ceil(12 / cw);
    var W = Math.ceil(left + C * cw + 10), H = Math.ceil(top + R * ch + 10);
    var dpr = window.devicePixelRatio || 1;
    canvas.width = W * dpr; canvas.height = H * dpr;
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
    var cur = { m: 0, v: 0, lo: 0, hi: 0 };
    function color(v, flag) {
      if (flag === 2) return C_REF;
      if (v === null || v === undefined) return C_NONE;
      if (v === "nan") return C_NAN;
      if (v === "inf") return C_INF;
      if (v === 0) return C_ZERO;
      if (cur.hi <= cur.lo) return ramp(1);
      return ramp((Math.log(v) - Math.log(cur.lo)) / (Math.log(cur.hi) - Math.log(cur.lo)));
    }
    function draw() {
      var view = d.views[cur.v], vals = view.values[d.metrics[cur.m].key], flags = view.flags;
      cur.lo = Infinity; cur.hi = 0;
      vals.forEach(function (v) {
        if (typeof v === "number" && v > 0) { cur.lo = Math.min(cur.lo, v); cur.hi = Math.max(cur.hi, v); }
      });
      if (!(cur.lo < Infinity)) { cur.lo = 0; cur.hi = 0; }
      var span = d.metrics[cur.m].range;
      if (span && cur.hi > 0) { cur.lo = Math.min(cur.lo, span[0]); cur.hi = Math.max(cur.hi, span[1]); }
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      ctx.font = "11px system-ui, sans-serif";
      ctx.fillStyle = "#1f2933";
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      for (var r = 0; r < R; r += rstep) ctx.fillText(d.rows[r], left - 6, top + r * ch + ch / 2);
      ctx.save();
      ctx.textAlign = "left";
      for (var c = 0; c < C; c += cstep) {
        ctx.save();
        ctx.translate(left + c * cw + cw / 2, top - 6);
        ctx.rotate(-Math.PI / 2);
        var lab = d.cols[c];
        while (lab.length > 4 && ctx.measureText(lab).width > top - 12) lab = lab.slice(0, -2);
        ctx.fillText(lab === d.cols[c] ? lab : lab + "\u2026", 0, 0);
        ctx.restore();
      }
      ctx.restore();
      for (r = 0; r < R; ++r) {
        for (c = 0; c < C; ++c) {
          var i = r * C + c;
          ctx.fillStyle = color(vals[i], flags[i]);
          ctx.fillRect(left + c * cw, top + r * ch, Math.max(1, cw - (cw > 5 ? 1 : 0)), Math.max(1, ch - (ch > 5 ? 1 : 0)));
          if (flags[i] === 1 && cw > 5 && ch > 5) {
            ctx.strokeStyle = "#1f2933";
            ctx.lineWidth = 1.5;
            ctx.strokeRect(left + c * cw + 1, top + r * ch + 1, cw - 3, ch - 3);
          }
        }
      }
      var grad = "linear-gradient(to right," + [0, 0.33, 0.67, 1].map(ramp).join(",") + ")";
      legend.innerHTML = '<span class="legend"><span>' + fmt(cur.lo || null) +
        ' <i style="width:120px;background:' + grad + '"></i> ' + fmt(cur.hi || null) + " (log scale)</span></span>" +
        swatch(C_ZERO, "0") + swatch(C_NAN, "nan (bits differ)") + swatch(C_INF, "inf") + swatch(C_NONE, "no data") +
        (flags.indexOf(2) >= 0 ? swatch(C_REF, "reference rank") : "") +
        (flags.indexOf(1) >= 0 ? '<span class="legend"><span><i style="border:2px solid #1f2933"></i>' +
          (d.flag_label || "flagged") + "</span></span>" : "");
    }
    canvas.addEventListener("mousemove", function (e) {
      var b = canvas.getBoundingClientRect();
      var c = Math.floor((e.clientX - b.left - left) / cw), r = Math.floor((e.clientY - b.top - top) / ch);
      if (r < 0 || c < 0 || r >= R || c >= C) { out.textContent = "hover a cell for its value"; return; }
      var view = d.views[cur.v], i = r * C + c, f = view.flags[i];
      out.textContent = d.rows[r] + " \u00b7 " + d.cols[c] + " \u00b7 " + view.label + " \u00b7 " +
        d.metrics[cur.m].label + " = " + fmt(view.values[d.metrics[cur.m].key][i]) +
        (f === 1 ? " (" + (d.flag_label || "flagged") + ")" : f === 2 ? " (reference)" : "");
    });
    selM.addEventListener("change", function () { cur.m = +selM.value; draw(); });
    selV.addEventListener("change", function () { cur.v = +selV.value; draw(); });
    draw();
  }
  Array.prototype.forEach.call(document.querySelectorAll(".heatmap"), setup);
})();
)js";
}

}  // namespace probelab::html
