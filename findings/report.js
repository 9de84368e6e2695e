(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('attograd-data').textContent);
  var NS = 'http://www.w3.org/2000/svg';
  var slider = document.getElementById('step'), probeSel = document.getElementById('probe');
  var label = document.getElementById('step-label'), grid = document.getElementById('grid');
  var play = document.getElementById('play'), timer = null;
  function el(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function cut(s, n) { var a = Array.from(s); return a.length <= n ? s : a.slice(0, n - 1).join('') + '\u2026'; }
  function colour(w) { return data.seq[Math.max(0, Math.min(100, Math.round(w * 100)))]; }
  function fmt(v) { return (v === null || v === undefined) ? '\u2013' : v.toFixed(2); }
  function draw() {
    var d = data.dumps[+slider.value];
    label.textContent = 'step ' + d.step + ' (' + (+slider.value + 1) + '/' + data.dumps.length + ')';
    var p = d.probes[Math.min(+probeSel.value, d.probes.length - 1)];
    grid.textContent = '';
    if (!p) { grid.textContent = 'No probes at this step.'; return; }
    var T = p.tokens.length, cell = T <= 20 ? 18 : Math.max(6, 360 / T), ch = 0.62 * 11;
    var labels = p.tokens.map(function (t, i) { return cut('(' + i + ') ' + t, 14); });
    var chars = Math.max(3, Math.max.apply(null, labels.map(function (s) { return Array.from(s).length; })));
    var left = chars * ch + 8, top = chars * ch + 8, titleH = 34, gap = 28;
    var pw = left + T * cell, ph = titleH + top + T * cell;
    var layers = {}, maxHead = 0;
    p.maps.forEach(function (m) { (layers[m.layer] = layers[m.layer] || []).push(m); maxHead = Math.max(maxHead, m.head); });
    var order = Object.keys(layers).map(Number).sort(function (a, b) { return a - b; });
    var W = (maxHead + 1) * (pw + gap), H = order.length * (ph + gap);
    // Natural size when it fits, scaled down (labels included) when the window is narrower.
    var svg = el('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'font-family': 'DejaVu Sans, sans-serif',
                         style: 'max-width:100%;height:auto'}, grid);
    var defs = el('defs', {}, svg);
    var pat = el('pattern', {id: 'masked', patternUnits: 'userSpaceOnUse', width: 6, height: 6, patternTransform: 'rotate(45)'}, defs);
    el('rect', {width: 6, height: 6, fill: '#eeeeee'}, pat);
    el('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#b0b0b0', 'stroke-width': 2}, pat);
    var scores = (data.history[+slider.value] || {});
    order.forEach(function (layer, li) {
      layers[layer].forEach(function (m) {
        var x = m.head * (pw + gap), y = li * (ph + gap), gx = x + left, gy = y + titleH + top;
        var g = el('g', {}, svg);
        el('text', {x: gx, y: y + 14, 'font-size': 13, 'font-weight': 'bold', fill: '#222'}, g, 'layer ' + m.layer + ' head ' + m.head);
        var s = scores[m.layer + ',' + m.head];
        if (s) el('text', {x: gx, y: y + 28, 'font-size': 11, fill: '#555'}, g,
          (s.task !== null ? 'task ' + fmt(s.task) + '  ' : '') + 'prev ' + fmt(s.previous_token) + '  ind ' + fmt(s.induction) + '  first ' + fmt(s.first_token) +
          (s.duplicate_token !== undefined && s.duplicate_token !== null ? '  dup ' + fmt(s.duplicate_token) : ''));
        var lg = el('g', {'font-family': 'DejaVu Sans Mono, Menlo, Consolas, monospace', 'font-size': 11, fill: '#333'}, g);
        for (var j = 0; j < T; j++) {
          var cx = gx + (j + 0.5) * cell + 11 * 0.35, cy = gy - 4;
          el('text', {x: cx, y: cy, transform: 'rotate(-90 ' + cx + ' ' + cy + ')'}, lg, labels[j]);
        }
        for (var i = 0; i < T; i++)
          el('text', {x: gx - 4, y: gy + (i + 0.5) * cell + 11 * 0.35, 'text-anchor': 'end'}, lg, labels[i]);
        for (i = 0; i < T; i++) for (j = 0; j < T; j++) {
          var masked = j > i, w = m.weights[i][j];
          var r = el('rect', {x: gx + j * cell, y: gy + i * cell, width: cell, height: cell, fill: masked ? 'url(#masked)' : colour(w)}, g);
          el('title', {}, r, '(' + i + ') ' + p.tokens[i] + ' looks at (' + j + ') ' + p.tokens[j] + ': ' + (masked ? 'masked' : w.toFixed(3)));
        }
        el('rect', {x: gx, y: gy, width: T * cell, height: T * cell, fill: 'none', stroke: '#888'}, g);
      });
    });
  }
  function fillProbes() {
    var d = data.dumps[+slider.value], keep = +probeSel.value || 0;
    probeSel.textContent = '';
    d.probes.forEach(function (p, k) {
      var o = document.createElement('option');
      o.value = k; o.textContent = 'probe ' + k + ': ' + cut(p.tokens.join(' '), 48);
      probeSel.appendChild(o);
    });
    probeSel.value = Math.min(keep, d.probes.length - 1);
  }
  if (!data.dumps.length) { grid.textContent = 'No attention dumps in this run.'; slider.disabled = true; play.disabled = true; return; }
  slider.max = data.dumps.length - 1;
  slider.value = data.dumps.length - 1;
  // A link can open a given dump and probe: report.html#dump=0&probe=2 (indices from 0).
  var want = /dump=(\d+)/.exec(location.hash), wantProbe = /probe=(\d+)/.exec(location.hash);
  if (want) slider.value = Math.min(+want[1], data.dumps.length - 1);
  slider.addEventListener('input', function () { fillProbes(); draw(); });
  probeSel.addEventListener('change', draw);
  play.addEventListener('click', function () {
    if (timer) { clearInterval(timer); timer = null; play.textContent = '\u25b6 play'; return; }
    if (+slider.value >= data.dumps.length - 1) slider.value = 0;
    play.textContent = '\u275a\u275a pause';
    fillProbes(); draw();
    timer = setInterval(function () {
      if (+slider.value >= data.dumps.length - 1) { clearInterval(timer); timer = null; play.textContent = '\u25b6 play'; return; }
      slider.value = +slider.value + 1; fillProbes(); draw();
    }, 900);
  });
  fillProbes();
  if (wantProbe) probeSel.value = Math.min(+wantProbe[1], probeSel.options.length - 1);
  draw();
  document.body.setAttribute('data-rendered', 'yes');
})();
