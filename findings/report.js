// report.html's script (report_html.cpp embeds it): the attention viewer, and the training charts' step
// cursor, hover readouts and log-scale toggle. The viewer's elements are built once per probe (its tokens
// and heads); a slider step only decodes that dump's maps and recolours the cells already drawn.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('attograd-data').textContent);
  var NS = 'http://www.w3.org/2000/svg';
  function $(id) { return document.getElementById(id); }
  var slider = $('step'), probeSel = $('probe'), modeSel = $('strip-mode'), label = $('step-label');
  var thumbs = $('thumbs'), focusTitle = $('focus-title'), focusScores = $('focus-scores');
  var focusMap = $('focus-map'), readout = $('readout'), strip = $('strip'), play = $('play'), timer = null;
  // head: index into the probe's maps (sorted by layer, head); query/key: the highlighted cell, or null.
  var state = {dump: 0, probe: 0, head: 0, query: null, key: null};
  var view = null;     // the elements drawn for the current probe (see build)
  var weights = [];    // the current dump's maps: one Uint8Array lower triangle per head, weight = byte / 255

  function el(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function html(tag, attrs, parent, text) {
    var e = document.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function cut(s, n) { var a = Array.from(s); return a.length <= n ? s : a.slice(0, n - 1).join('') + '\u2026'; }
  function colour(w) { return data.seq[Math.max(0, Math.min(100, Math.round(w * 100)))]; }
  function fmt(v) { return (v === null || v === undefined) ? '\u2013' : v.toFixed(2); }
  function decode(b64) {
    var s = atob(b64), a = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a;
  }
  function at(h, i, j) { return weights[h][i * (i + 1) / 2 + j] / 255; }
  function currentProbe() {
    var d = data.dumps[state.dump];
    return d.probes[Math.min(state.probe, d.probes.length - 1)];
  }

  // The elements for one probe: thumbnails (one canvas per head), the enlarged head's SVG (one rect per
  // visible cell, the masked triangle as one hatched path, highlight bands), and the token strip.
  function build(p) {
    var tokens = data.tokens[p.tokens], T = tokens.length;
    var heads = p.maps.map(function (m) { return [m[0], m[1]]; });
    var key = p.tokens + '|' + heads.join(';');
    if (view && view.key === key) return;
    var seen = {};
    tokens.forEach(function (t, i) { (seen[t] = seen[t] || []).push(i); });
    var others = tokens.map(function (t, i) { return seen[t].filter(function (k) { return k !== i; }); });
    view = {key: key, T: T, tokens: tokens, heads: heads, others: others, canvases: [], buttons: [], cells: [],
            rowLabels: [], colLabels: [], stripSpans: []};
    if (state.head >= heads.length) state.head = 0;
    if (state.query !== null && state.query >= T) state.query = state.key = null;

    // Thumbnails: one row per layer.
    thumbs.textContent = '';
    var s = Math.max(2, Math.min(5, Math.floor(110 / T)));
    var byLayer = {};
    heads.forEach(function (lh, h) {
      var row = byLayer[lh[0]];
      if (!row) {
        row = byLayer[lh[0]] = html('div', {'class': 'thumb-row'}, thumbs);
        html('span', {'class': 'thumb-layer'}, row, 'layer ' + lh[0]);
      }
      var b = html('button', {type: 'button', role: 'option', 'class': 'thumb', 'data-head': h,
                              'aria-label': 'layer ' + lh[0] + ' head ' + lh[1]}, row);
      var c = html('canvas', {width: T * s, height: T * s}, b);
      html('span', {}, b, 'L' + lh[0] + ' H' + lh[1]);
      view.canvases.push(c);
      view.buttons.push(b);
    });
    view.cellPx = s;

    // The enlarged head: natural size (labels 11 px), never scaled down; a wide map scrolls in its box.
    focusMap.textContent = '';
    var cell = Math.max(12, Math.min(22, Math.floor(520 / T)));
    var labels = tokens.map(function (t, i) { return cut('(' + i + ') ' + t, 14); });
    var chars = Math.max(3, Math.max.apply(null, labels.map(function (l) { return Array.from(l).length; })));
    var left = chars * 6.9 + 10, top = chars * 6.9 + 10, W = left + T * cell + 4, H = top + T * cell + 4;
    var svg = el('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, tabindex: 0, role: 'img',
                         'aria-label': 'attention map of the chosen head; arrow keys move between cells',
                         'font-family': 'DejaVu Sans Mono, Menlo, Consolas, monospace', 'font-size': 11}, focusMap);
    var defs = el('defs', {}, svg);
    var pat = el('pattern', {id: 'viewer-masked', patternUnits: 'userSpaceOnUse', width: 6, height: 6,
                             patternTransform: 'rotate(45)'}, defs);
    el('rect', {width: 6, height: 6, fill: '#eeeeee'}, pat);
    el('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#b0b0b0', 'stroke-width': 2}, pat);
    var gx = left, gy = top;
    for (var j = 0; j < T; j++) {
      var cx = gx + (j + 0.5) * cell + 11 * 0.35, cy = gy - 4;
      view.colLabels.push(el('text', {x: cx, y: cy, transform: 'rotate(-90 ' + cx + ' ' + cy + ')',
                                      'class': others[j].length ? 'lab rep' : 'lab'}, svg, labels[j]));
    }
    for (var i = 0; i < T; i++)
      view.rowLabels.push(el('text', {x: gx - 4, y: gy + (i + 0.5) * cell + 11 * 0.35, 'text-anchor': 'end',
                                      'class': others[i].length ? 'lab rep' : 'lab'}, svg, labels[i]));
    var cells = el('g', {}, svg);
    for (i = 0; i < T; i++)
      for (j = 0; j <= i; j++)
        view.cells.push(el('rect', {x: gx + j * cell, y: gy + i * cell, width: cell, height: cell,
                                    'data-i': i, 'data-j': j}, cells));
    var d = 'M' + (gx + cell) + ',' + gy;
    for (i = 0; i + 1 < T; i++) d += 'V' + (gy + (i + 1) * cell) + 'H' + (gx + (i + 2) * cell);
    d += 'V' + gy + 'Z';
    if (T > 1) el('path', {d: d, fill: 'url(#viewer-masked)'}, svg);
    el('rect', {x: gx, y: gy, width: T * cell, height: T * cell, fill: 'none', stroke: '#888'}, svg);
    view.hlRow = el('rect', {id: 'hl-row', 'class': 'hl', visibility: 'hidden', height: cell}, svg);
    view.hlCol = el('rect', {id: 'hl-col', 'class': 'hl', visibility: 'hidden', width: cell}, svg);
    view.hlCell = el('rect', {id: 'hl-cell', 'class': 'hl-cell', visibility: 'hidden', width: cell, height: cell}, svg);
    view.svg = svg;
    view.geom = {gx: gx, gy: gy, cell: cell};
    svg.addEventListener('mouseover', function (e) {
      var t = e.target;
      if (t.hasAttribute && t.hasAttribute('data-i')) pointAt(+t.getAttribute('data-i'), +t.getAttribute('data-j'));
    });
    svg.addEventListener('mouseleave', function () { if (document.activeElement !== svg) pointAt(null, null); });
    svg.addEventListener('focus', function () { if (state.query === null) pointAt(T - 1, T - 1); else pointAt(state.query, state.key); });
    svg.addEventListener('blur', function () { pointAt(null, null); });
    svg.addEventListener('keydown', function (e) {
      var q = state.query === null ? T - 1 : state.query, k = state.key === null ? q : state.key;
      if (e.key === 'ArrowUp') q = Math.max(0, q - 1);
      else if (e.key === 'ArrowDown') q = Math.min(T - 1, q + 1);
      else if (e.key === 'ArrowLeft') k = Math.max(0, k - 1);
      else if (e.key === 'ArrowRight') k = k + 1;
      else return;
      e.preventDefault(); e.stopPropagation();
      pointAt(q, Math.min(k, q));
    });

    // The token strip.
    strip.textContent = '';
    tokens.forEach(function (t, i) {
      var sp = html('button', {type: 'button', 'class': others[i].length ? 'tok rep' : 'tok', 'data-i': i,
                               title: '(' + i + ') ' + t + (others[i].length ? ' \u2014 also at ' + others[i].join(', ') : '')},
                    strip, t);
      view.stripSpans.push(sp);
    });
  }

  // Highlights query row i and key column j (or clears with null) and shows the weight.
  function pointAt(i, j) {
    if (i !== null) { state.query = i; state.key = j; }
    var g = view.geom, show = i !== null;
    [view.hlRow, view.hlCol, view.hlCell].forEach(function (r) { r.setAttribute('visibility', show ? 'visible' : 'hidden'); });
    view.rowLabels.forEach(function (t, k) { t.classList.toggle('hl-lab', show && k === i); });
    view.colLabels.forEach(function (t, k) { t.classList.toggle('hl-lab', show && k === j); });
    if (show) {
      view.hlRow.setAttribute('x', g.gx); view.hlRow.setAttribute('y', g.gy + i * g.cell);
      view.hlRow.setAttribute('width', (i + 1) * g.cell);
      view.hlCol.setAttribute('x', g.gx + j * g.cell); view.hlCol.setAttribute('y', g.gy + j * g.cell);
      view.hlCol.setAttribute('height', (view.T - j) * g.cell);
      view.hlCell.setAttribute('x', g.gx + j * g.cell); view.hlCell.setAttribute('y', g.gy + i * g.cell);
    }
    showReadout();
    colourStrip();
  }

  function showReadout() {
    if (state.query === null || state.key === null || !view.hlRow || view.hlRow.getAttribute('visibility') === 'hidden') {
      readout.textContent = '\u00a0';
      return;
    }
    var i = state.query, j = state.key;
    readout.textContent = '(' + i + ') ' + view.tokens[i] + ' attends to (' + j + ') ' + view.tokens[j] + ': ' +
                          at(state.head, i, j).toFixed(3);
  }

  // Strip colours: where the selected query attends (its row), or what attends to it (its column).
  function colourStrip() {
    var T = view.T, q = state.query === null ? T - 1 : state.query, from = modeSel.value === 'from';
    view.stripSpans.forEach(function (sp, k) {
      var w = from ? (k >= q ? at(state.head, k, q) : null) : (k <= q ? at(state.head, q, k) : null);
      sp.style.background = w === null ? '' : colour(w);
      sp.style.color = w !== null && w > 0.55 ? '#fff' : '';
      sp.classList.toggle('masked-tok', w === null);
      sp.classList.toggle('selected', k === q);
    });
  }

  function drawThumb(h) {
    var c = view.canvases[h], ctx = c.getContext('2d'), s = view.cellPx, T = view.T;
    ctx.fillStyle = '#eeeeee';
    ctx.fillRect(0, 0, c.width, c.height);
    for (var i = 0; i < T; i++)
      for (var j = 0; j <= i; j++) { ctx.fillStyle = colour(at(h, i, j)); ctx.fillRect(j * s, i * s, s, s); }
  }

  // Recolours everything for the current dump, probe and head; builds only when the probe changed.
  function update() {
    var t0 = performance.now();
    var p = currentProbe();
    build(p);
    weights = p.maps.map(function (m) { return decode(m[2]); });
    var h = state.head, lh = view.heads[h];
    for (var k = 0; k < view.heads.length; k++) {
      drawThumb(k);
      view.buttons[k].setAttribute('aria-selected', k === h ? 'true' : 'false');
      view.buttons[k].tabIndex = k === h ? 0 : -1;
    }
    var n = 0;
    for (var i = 0; i < view.T; i++)
      for (var j = 0; j <= i; j++) view.cells[n++].setAttribute('fill', colour(at(h, i, j)));
    focusTitle.textContent = 'layer ' + lh[0] + ' head ' + lh[1];
    var sc = (data.history[state.dump] || {})[lh[0] + ',' + lh[1]];
    focusScores.textContent = !sc ? '' :
      (sc.task !== null ? 'task ' + fmt(sc.task) + ' \u00b7 ' : '') + 'previous token ' + fmt(sc.previous_token) +
      ' \u00b7 induction ' + fmt(sc.induction) + ' \u00b7 first token ' + fmt(sc.first_token) +
      (sc.duplicate_token !== undefined && sc.duplicate_token !== null ? ' \u00b7 duplicate token ' + fmt(sc.duplicate_token) : '');
    label.textContent = 'step ' + data.steps[state.dump] + ' (' + (state.dump + 1) + '/' + data.steps.length + ')';
    colourStrip();
    showReadout();
    charts.forEach(function (c) { c.cursor(data.steps[state.dump]); });
    syncHash('#dump=' + state.dump + '&probe=' + state.probe + '&head=' + lh[0] + '.' + lh[1]);
    window.attogradRedrawMs = performance.now() - t0;
  }

  // The address follows the view once it rests for 150 ms: a slider dragged fast would otherwise replace
  // the history entry so often that the browser throttles it (and says so in the console).
  var hashTimer = null;
  function syncHash(hash) {
    clearTimeout(hashTimer);
    hashTimer = setTimeout(function () {
      if (location.hash !== hash && (location.hash === '' || /dump=/.test(location.hash)))
        history.replaceState(null, '', hash);
    }, 150);
  }

  function fillProbes() {
    var d = data.dumps[state.dump];
    probeSel.textContent = '';
    d.probes.forEach(function (p, k) {
      html('option', {value: k}, probeSel, 'probe ' + k + ': ' + cut(data.tokens[p.tokens].join(' '), 40));
    });
    state.probe = Math.min(state.probe, d.probes.length - 1);
    probeSel.value = state.probe;
  }

  function setDump(k) {
    k = Math.max(0, Math.min(data.dumps.length - 1, k));
    state.dump = k;
    slider.value = k;
    fillProbes();
    update();
  }

  function setHead(h, focus) {
    state.head = Math.max(0, Math.min(view.heads.length - 1, h));
    update();
    if (focus) view.buttons[state.head].focus();
  }

  // The training charts: a cursor at the slider's step, a readout of the nearest point of every line under
  // the pointer, and the log/linear loss toggle.
  var charts = Array.prototype.map.call(document.querySelectorAll('svg.chart[data-x1]'), function (svg) {
    function num(k) { return +svg.getAttribute('data-' + k); }
    var x0 = num('x0'), x1 = num('x1'), px0 = num('px0'), px1 = num('px1');
    var y0 = num('y0'), y1 = num('y1'), py0 = num('py0'), py1 = num('py1'), log = num('log') === 1;
    var cursor = svg.querySelector('line.cursor'), hover = svg.querySelector('line.hover');
    var caption = svg.parentNode.querySelector('figcaption');
    var lines = Array.prototype.map.call(svg.querySelectorAll('polyline[data-name]'), function (pl) {
      var pts = pl.getAttribute('points').trim().split(/\s+/).map(function (s) { return s.split(',').map(Number); });
      return {name: pl.getAttribute('data-name'), pts: pts};
    });
    function stepAt(px) { return x0 + (px - px0) / (px1 - px0) * (x1 - x0); }
    function valueAt(py) {
      var f = (py - py0) / (py1 - py0);
      return log ? Math.pow(10, Math.log10(y0) + f * (Math.log10(y1) - Math.log10(y0))) : y0 + f * (y1 - y0);
    }
    function place(line, px) { line.setAttribute('x1', px); line.setAttribute('x2', px); line.setAttribute('visibility', 'visible'); }
    svg.addEventListener('mousemove', function (e) {
      var pt = svg.createSVGPoint();
      pt.x = e.clientX; pt.y = e.clientY;
      var x = pt.matrixTransform(svg.getScreenCTM().inverse()).x, best = null, parts = [];
      lines.forEach(function (l) {
        var near = null;
        l.pts.forEach(function (p) { if (!near || Math.abs(p[0] - x) < Math.abs(near[0] - x)) near = p; });
        if (!near) return;
        if (!best || Math.abs(near[0] - x) < Math.abs(best[0] - x)) best = near;
        parts.push(l.name + ' ' + valueAt(near[1]).toPrecision(3));
      });
      if (!best) return;
      place(hover, best[0]);
      caption.textContent = 'step ' + Math.round(stepAt(best[0])) + ': ' + parts.join(' \u00b7 ');
    });
    svg.addEventListener('mouseleave', function () { hover.setAttribute('visibility', 'hidden'); caption.textContent = '\u00a0'; });
    return {cursor: function (step) { place(cursor, px0 + (step - x0) / (x1 - x0) * (px1 - px0)); }};
  });
  var logBox = $('log-loss');
  function applyLog() {
    if (!logBox) return;
    $('loss-log').style.display = logBox.checked ? '' : 'none';
    $('loss-linear').style.display = logBox.checked ? 'none' : '';
  }
  if (logBox) { logBox.addEventListener('change', applyLog); applyLog(); }

  if (!data.dumps.length) {
    slider.disabled = true; play.disabled = true; probeSel.disabled = true; modeSel.disabled = true;
    document.body.setAttribute('data-rendered', 'yes');
    return;
  }
  slider.max = data.dumps.length - 1;
  state.dump = data.dumps.length - 1;
  // A link opens a given view: report.html#dump=0&probe=2&head=1.3 (dump and probe indices from 0, head as
  // layer.head).
  var want = /dump=(\d+)/.exec(location.hash), wantProbe = /probe=(\d+)/.exec(location.hash);
  var wantHead = /head=(\d+)\.(\d+)/.exec(location.hash);
  if (want) state.dump = Math.min(+want[1], data.dumps.length - 1);
  if (wantProbe) state.probe = +wantProbe[1];
  slider.value = state.dump;
  fillProbes();
  build(currentProbe());
  if (wantHead)
    view.heads.forEach(function (lh, h) { if (lh[0] === +wantHead[1] && lh[1] === +wantHead[2]) state.head = h; });

  slider.addEventListener('input', function () { setDump(+slider.value); });
  probeSel.addEventListener('change', function () { state.probe = +probeSel.value; update(); });
  modeSel.addEventListener('change', colourStrip);
  thumbs.addEventListener('click', function (e) {
    var b = e.target.closest('button.thumb');
    if (b) setHead(+b.getAttribute('data-head'), true);
  });
  thumbs.addEventListener('keydown', function (e) {
    var d = {ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1}[e.key];
    if (!d) return;
    e.preventDefault(); e.stopPropagation();
    setHead(state.head + d, true);
  });
  strip.addEventListener('click', function (e) {
    var b = e.target.closest('button.tok');
    if (b) { var i = +b.getAttribute('data-i'); state.query = i; state.key = null; colourStrip(); }
  });
  // Arrow keys step through the dumps unless a control that uses them has the focus.
  document.addEventListener('keydown', function (e) {
    var t = e.target, tag = t.tagName;
    if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA' || t.closest('#thumbs') || t === view.svg) return;
    if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
      e.preventDefault();
      setDump(state.dump + (e.key === 'ArrowRight' ? 1 : -1));
    }
  });
  play.addEventListener('click', function () {
    if (timer) { clearInterval(timer); timer = null; play.textContent = '\u25b6 play'; return; }
    if (state.dump >= data.dumps.length - 1) setDump(0);
    play.textContent = '\u275a\u275a pause';
    timer = setInterval(function () {
      if (state.dump >= data.dumps.length - 1) { clearInterval(timer); timer = null; play.textContent = '\u25b6 play'; return; }
      setDump(state.dump + 1);
    }, 900);
  });
  update();
  document.body.setAttribute('data-rendered', 'yes');
})();
