"""The page's own style and script, inlined into every page.

The script does two things and needs nothing else: a click on a table's header sorts its rows
by that column (numbers by the value in ``data-v``, else the text), and a mark with a
``data-tip`` shows that text beside the pointer while it hovers (each mark also carries an
SVG ``<title>``, which a browser shows without any script).
"""

from __future__ import annotations

CSS = """
:root { --ink: #1d2733; --mute: #5b6775; --line: #d8dee6; --bg: #f7f9fb; --accent: #2f6db3; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--ink); background: var(--bg); }
header { background: #16324f; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; color: #c9d6e4; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--line);
      padding: 8px 28px; z-index: 2; font-size: 13px; }
nav a { color: var(--accent); margin-right: 14px; text-decoration: none; }
main { padding: 12px 28px 40px; max-width: 1400px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px;
          margin: 16px 0; padding: 14px 18px; overflow-x: auto; }
section h2 { margin: 0 0 8px; font-size: 17px; }
.note { color: var(--mute); font-size: 12.5px; margin: 4px 0 8px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; min-width: 150px; }
.card b { display: block; font-size: 20px; }
.card span { color: var(--mute); font-size: 12px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
th { cursor: pointer; user-select: none; background: #eef2f6; position: relative; }
th:after { content: " \\2195"; color: #9aa6b2; font-size: 11px; }
th.asc:after { content: " \\2191"; color: var(--ink); }
th.desc:after { content: " \\2193"; color: var(--ink); }
.chart { overflow-x: auto; }
svg text { font: 11px system-ui, sans-serif; fill: var(--ink); }
svg .axis { stroke: #8a96a3; stroke-width: 1; }
svg .grid { stroke: #e6eaef; stroke-width: 1; }
svg rect[data-tip]:hover { opacity: 0.75; }
svg circle[data-tip] { fill-opacity: 0; }
svg circle[data-tip]:hover { fill-opacity: 0.9; }
.legend { font-size: 12px; color: var(--mute); margin: 4px 0; }
.legend i { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px;
            border-radius: 2px; vertical-align: -1px; }
#tip { position: fixed; pointer-events: none; background: #16324f; color: #fff;
       padding: 4px 8px; border-radius: 4px; font-size: 12px; display: none; z-index: 9;
       white-space: pre; }
figure { margin: 8px 0; } figure img { max-width: 100%; border: 1px solid var(--line); }
figcaption { color: var(--mute); font-size: 12.5px; }
"""

SCRIPT = """
(function () {
  'use strict';
  function key(cell) {
    var v = cell.getAttribute('data-v');
    if (v !== null && v !== '') { return [0, parseFloat(v)]; }
    return [1, cell.textContent.trim().toLowerCase()];
  }
  function sortBy(th) {
    var table = th.closest('table'), body = table.tBodies[0];
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var up = !th.classList.contains('asc');
    Array.prototype.forEach.call(th.parentNode.children, function (h) {
      h.classList.remove('asc', 'desc');
    });
    th.classList.add(up ? 'asc' : 'desc');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x[0] !== y[0]) { return x[0] - y[0]; }
      var c = x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
      return up ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.addEventListener('click', function (e) {
    var th = e.target.closest && e.target.closest('th');
    if (th && th.closest('table.sortable')) { sortBy(th); }
  });
  var tip = document.getElementById('tip');
  document.addEventListener('mousemove', function (e) {
    var m = e.target.closest && e.target.closest('[data-tip]');
    if (!m) { tip.style.display = 'none'; return; }
    tip.textContent = m.getAttribute('data-tip');
    tip.style.display = 'block';
    tip.style.left = (e.clientX + 14) + 'px';
    tip.style.top = (e.clientY + 12) + 'px';
  });
}());
"""
