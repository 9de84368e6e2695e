// The attribution graph viewer (graph.html; findings/graph_html.h writes the page and its data). Re-prunes
// the full graph in the page with circuit-tracer's rule, as attribution/graph.cpp's score_graph does, draws the
// kept nodes by layer (rows) and position (columns) and the kept edges by sign and weight, and wires the
// hover read-out, pinning and the two threshold sliders.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('graph-data').textContent);
  var nodes = data.nodes, N = nodes.length, E = data.w.length;
  var src = data.src, tgt = data.tgt, w = data.w;
  var nF = data.n_features, errorEnd = data.n_features + data.n_errors;
  var L = data.n_layers, T = data.prompt.length;
  var SVGNS = 'http://www.w3.org/2000/svg';
  var logitWeight = new Float64Array(N);
  nodes.forEach(function (n, i) { if (n.kind === 'logit') logitWeight[i] = n.act; });

  // The kept links' split by path, keyed "source,target".
  var paths = {};
  data.paths.forEach(function (p) { paths[p[0] + ',' + p[1]] = p[2]; });

  // w N + w N^2 + ... over the edges `use` with row-normalised weights `nw` (the graph has no cycle).
  function influence(use, nw) {
    var current = new Float64Array(N), total = new Float64Array(N), k, e, i;
    for (k = 0; k < use.length; k++) { e = use[k]; current[src[e]] += logitWeight[tgt[e]] * nw[e]; }
    total.set(current);
    for (var it = 0; it < 1000; it++) {
      var any = false;
      for (i = 0; i < N; i++) if (current[i] !== 0) { any = true; break; }
      if (!any) break;
      var next = new Float64Array(N);
      for (k = 0; k < use.length; k++) { e = use[k]; if (current[tgt[e]] !== 0) next[src[e]] += current[tgt[e]] * nw[e]; }
      for (i = 0; i < N; i++) total[i] += next[i];
      current = next;
    }
    return total;
  }
  // |A| with each row divided by its sum, on the edges `use`.
  function normalise(use) {
    var rowSum = new Float64Array(N), nw = new Float64Array(E), k;
    for (k = 0; k < use.length; k++) rowSum[tgt[use[k]]] += Math.abs(w[use[k]]);
    for (k = 0; k < use.length; k++) nw[use[k]] = Math.abs(w[use[k]]) / Math.max(rowSum[tgt[use[k]]], 1e-10);
    return nw;
  }
  // The score below which entries are dropped so the rest hold `threshold` of the total.
  function findThreshold(scores, threshold) {
    var s = Array.prototype.slice.call(scores).sort(function (a, b) { return b - a; });
    var total = 0, cum = 0, i;
    for (i = 0; i < s.length; i++) total += s[i];
    if (!(total > 0)) return 0;
    for (i = 0; i < s.length; i++) { cum += s[i]; if (cum / total >= threshold) break; }
    return s[Math.min(i, s.length - 1)];
  }

  var allEdges = [];
  for (var e0 = 0; e0 < E; e0++) allEdges.push(e0);
  var nodeInfluence = influence(allEdges, normalise(allEdges));
  // Each node's cumulative share of the influence (graph.json's "influence").
  var cumulative = new Float64Array(N);
  (function () {
    var order = [], total = 0, cum = 0;
    for (var i = 0; i < N; i++) { order.push(i); total += nodeInfluence[i]; }
    order.sort(function (a, b) { return nodeInfluence[b] - nodeInfluence[a] || a - b; });
    order.forEach(function (i) { cum += nodeInfluence[i]; cumulative[i] = total > 0 ? cum / total : 0; });
  })();

  // The pruning: nodes by influence, then edges by their score in the pruned graph, then feature and error
  // nodes without a kept outgoing edge (features also without a kept incoming one), until nothing changes.
  function prune(nodeThreshold, edgeThreshold) {
    var cut = findThreshold(nodeInfluence, nodeThreshold), keep = new Uint8Array(N), i, k, e;
    for (i = 0; i < N; i++) keep[i] = nodeInfluence[i] >= cut || i >= errorEnd ? 1 : 0;
    var use = [];
    for (e = 0; e < E; e++) if (keep[src[e]] && keep[tgt[e]]) use.push(e);
    var nw = normalise(use), pi = influence(use, nw), scores = new Float64Array(use.length);
    for (k = 0; k < use.length; k++) { e = use[k]; scores[k] = (pi[tgt[e]] + logitWeight[tgt[e]]) * nw[e]; }
    var edgeCut = findThreshold(scores, edgeThreshold), kept = [];
    for (k = 0; k < use.length; k++) if (scores[k] >= edgeCut) kept.push(use[k]);
    // A cut of 0 keeps every entry of the matrix, so every kept node has edges both ways.
    for (var changed = edgeCut > 0; changed;) {
      changed = false;
      var out = new Uint8Array(N), inc = new Uint8Array(N);
      kept.forEach(function (e) { if (keep[src[e]] && keep[tgt[e]]) { out[src[e]] = 1; inc[tgt[e]] = 1; } });
      for (i = 0; i < errorEnd; i++)
        if (keep[i] && (!out[i] || (i < nF && !inc[i]))) { keep[i] = 0; changed = true; }
    }
    return {nodes: keep, edges: kept.filter(function (e) { return keep[src[e]] && keep[tgt[e]]; })};
  }

  var graphDiv = document.getElementById('graph'), info = document.getElementById('node-info');
  var nodeSlider = document.getElementById('node-threshold'), edgeSlider = document.getElementById('edge-threshold');
  var pinned = [], hovered = -1, current = null, drawnWidth = 0;

  function fmt(v, d) { return (v >= 0 ? '+' : '') + v.toFixed(d === undefined ? 3 : d); }
  function el(name, attrs, parent) {
    var x = document.createElementNS(SVGNS, name);
    for (var a in attrs) x.setAttribute(a, attrs[a]);
    if (parent) parent.appendChild(x);
    return x;
  }
  function row(n) { return n.kind === 'embedding' || n.kind === 'position' ? 0 : n.kind === 'logit' ? L + 1 : n.layer + 1; }
  function rowName(r) { return r === 0 ? 'emb' : r === L + 1 ? 'logit' : 'L' + (r - 1); }

  function draw() {
    var W = Math.max(300, Math.floor(graphDiv.clientWidth || 800)), left = 40, right = 8, top = 14, bottom = 30;
    var rowH = 70, H = top + bottom + rowH * (L + 1), colW = (W - left - right) / T;
    drawnWidth = W;
    var cells = {}, pos = {};
    for (var i = 0; i < N; i++) {
      if (!current.nodes[i]) continue;
      var key = row(nodes[i]) + ',' + nodes[i].pos;
      (cells[key] = cells[key] || []).push(i);
    }
    Object.keys(cells).forEach(function (key) {
      var list = cells[key], r = +key.split(',')[0], p = +key.split(',')[1];
      var gap = Math.min(12, colW * 0.85 / Math.max(1, list.length));
      list.forEach(function (i, k) {
        pos[i] = [left + (p + 0.5) * colW + (k - (list.length - 1) / 2) * gap, top + (L + 1 - r) * rowH];
      });
    });
    var svg = el('svg', {viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, role: 'img',
                         'aria-label': 'attribution graph: ' + current.edges.length + ' edges'});
    for (var r = 0; r <= L + 1; r++) {
      var y = top + (L + 1 - r) * rowH;
      el('line', {x1: left, x2: W - right, y1: y, y2: y, 'class': 'row-line'}, svg);
      el('text', {x: 4, y: y + 4, 'class': 'row-lab'}, svg).textContent = rowName(r);
    }
    var maxChars = Math.max(1, Math.floor(colW / 7));
    data.prompt.forEach(function (t, p) {
      var s = t.length > maxChars ? t.slice(0, Math.max(1, maxChars - 1)) + '\u2026' : t;
      var lab = el('text', {x: left + (p + 0.5) * colW, y: H - 10, 'text-anchor': 'middle', 'class': 'tok-lab'}, svg);
      lab.textContent = s;
      el('title', {}, lab).textContent = p + ': ' + t;
    });
    var maxW = 0;
    current.edges.forEach(function (e) { maxW = Math.max(maxW, Math.abs(w[e])); });
    var edges = el('g', {id: 'edges'}, svg);
    current.edges.forEach(function (e) {
      var a = pos[src[e]], b = pos[tgt[e]];
      el('line', {x1: a[0].toFixed(1), y1: a[1].toFixed(1), x2: b[0].toFixed(1), y2: b[1].toFixed(1),
                  'stroke-width': (0.6 + 5 * Math.abs(w[e]) / (maxW || 1)).toFixed(2),
                  'class': 'edge ' + (w[e] >= 0 ? 'pos' : 'neg'), 'data-s': src[e], 'data-t': tgt[e]}, edges);
    });
    var g = el('g', {id: 'nodes'}, svg);
    Object.keys(pos).forEach(function (k) {
      var i = +k, n = nodes[i], c = pos[i], shape;
      if (n.kind === 'feature') shape = el('circle', {cx: c[0].toFixed(1), cy: c[1].toFixed(1), r: 5}, g);
      else shape = el('rect', {x: (c[0] - 5).toFixed(1), y: (c[1] - 5).toFixed(1), width: 10, height: 10}, g);
      shape.setAttribute('class', 'node ' + n.kind + (pinned.indexOf(i) >= 0 ? ' pinned' : ''));
      shape.setAttribute('data-i', i);
      shape.setAttribute('data-id', n.id);
      shape.setAttribute('tabindex', '0');
      el('title', {}, shape).textContent = n.label;
    });
    graphDiv.replaceChildren(svg);
    document.getElementById('kept-counts').textContent =
        g.childNodes.length + ' nodes, ' + current.edges.length + ' edges kept';
    highlight();
  }

  // The node the read-out shows: the hovered one, else the last pinned one.
  function shown() { return hovered >= 0 ? hovered : pinned.length ? pinned[pinned.length - 1] : -1; }

  function edgeList(i, incoming) {
    return current.edges.filter(function (e) { return (incoming ? tgt[e] : src[e]) === i; })
        .sort(function (a, b) { return Math.abs(w[b]) - Math.abs(w[a]); }).slice(0, 6);
  }

  function describe(i) {
    if (i < 0) {
      info.innerHTML = '<p class="muted">Hover a node for its numbers; click to pin it.</p>';
      return;
    }
    var n = nodes[i], h = '<h3></h3><table><tbody>';
    function line(k, v) { h += '<tr><td>' + k + '</td><td class="num">' + v + '</td></tr>'; }
    line('kind', n.kind);
    line('layer', n.kind === 'feature' || n.kind === 'error' ? n.layer : n.kind === 'logit' ? 'output' : 'embedding');
    line('position', n.pos + ' (' + escapeText(data.prompt[n.pos]) + ')');
    if (n.kind === 'feature') line('activation', n.act.toPrecision(4));
    if (n.kind === 'logit') line('probability', n.act.toPrecision(4));
    line('influence', cumulative[i].toFixed(4) + ' (cumulative share)');
    h += '</tbody></table>';
    if (n.up) {
      h += '<p><b>raises</b> ' + n.up.map(function (p) { return escapeText(p[0]) + ' ' + fmt(p[1], 2); }).join(', ') +
           '<br><b>lowers</b> ' + n.down.map(function (p) { return escapeText(p[0]) + ' ' + fmt(p[1], 2); }).join(', ') + '</p>';
    }
    // A feature's top examples from its transcoder's feature page: each a window of tokens, the peak boxed.
    if (n.kind === 'feature') {
      if (!n.page) h += '<p class="muted no-page">no feature page</p>';
      else if (!n.ex.length) h += '<p class="muted no-page">no examples on the feature page</p>';
      else {
        h += '<p><b>top examples</b></p><div class="examples">';
        n.ex.forEach(function (x) {
          h += '<div class="ex">' + x[0].map(function (t, k) {
            return k === x[1] ? '<b>' + escapeText(t) + '</b>' : '<i>' + escapeText(t) + '</i>';
          }).join('') + ' <small>' + x[2].toPrecision(3) + '</small></div>';
        });
        h += '</div>';
      }
    }
    if (n.kind === 'error') h += '<p class="muted">the MLP\'s reconstruction error here (no feature page)</p>';
    [['strongest inputs', true], ['strongest outputs', false]].forEach(function (d) {
      var list = edgeList(i, d[1]);
      if (!list.length) return;
      h += '<p><b>' + d[0] + '</b></p><table class="edges"><tbody>';
      list.forEach(function (e) {
        var other = nodes[d[1] ? src[e] : tgt[e]], p = paths[src[e] + ',' + tgt[e]];
        h += '<tr><td>' + escapeText(other.label) + '</td><td class="num">' + fmt(w[e]) + '</td></tr>';
        if (p && !(p.length === 1 && p[0][0] === 'resid')) {
          var top = p.slice().sort(function (a, b) { return Math.abs(b[1]) - Math.abs(a[1]); }).slice(0, 3);
          h += '<tr><td colspan="2" class="paths">' + top.map(function (q) { return escapeText(q[0]) + ' ' + fmt(q[1]); }).join(', ') + '</td></tr>';
        }
      });
      h += '</tbody></table>';
    });
    info.innerHTML = h;
    info.querySelector('h3').textContent = n.label + (pinned.indexOf(i) >= 0 ? ' (pinned)' : '');
  }
  function escapeText(s) {
    return String(s).replace(/[&<>"']/g, function (c) { return '&#' + c.charCodeAt(0) + ';'; });
  }

  // The shown node outlined and its edges brought forward.
  function highlight() {
    var i = shown();
    graphDiv.classList.toggle('focus', i >= 0);
    graphDiv.querySelectorAll('.node').forEach(function (x) {
      var k = +x.getAttribute('data-i');
      x.classList.toggle('hover', k === hovered);
      x.classList.toggle('pinned', pinned.indexOf(k) >= 0);
    });
    graphDiv.querySelectorAll('.edge').forEach(function (x) {
      x.classList.toggle('near', i >= 0 && (+x.getAttribute('data-s') === i || +x.getAttribute('data-t') === i));
    });
    describe(i);
  }

  function nodeOf(ev) { var t = ev.target.closest && ev.target.closest('.node'); return t ? +t.getAttribute('data-i') : -1; }
  graphDiv.addEventListener('mouseover', function (ev) { var i = nodeOf(ev); if (i >= 0 && i !== hovered) { hovered = i; highlight(); } });
  graphDiv.addEventListener('mouseout', function (ev) { if (nodeOf(ev) >= 0) { hovered = -1; highlight(); } });
  function togglePin(i) {
    var k = pinned.indexOf(i);
    if (k >= 0) pinned.splice(k, 1); else pinned.push(i);
    highlight();
  }
  graphDiv.addEventListener('click', function (ev) { var i = nodeOf(ev); if (i >= 0) togglePin(i); });
  graphDiv.addEventListener('keydown', function (ev) {
    var i = nodeOf(ev);
    if (i >= 0 && (ev.key === 'Enter' || ev.key === ' ')) { ev.preventDefault(); togglePin(i); }
  });
  graphDiv.addEventListener('focusin', function (ev) { var i = nodeOf(ev); if (i >= 0) { hovered = i; highlight(); } });

  function update() {
    var nt = +nodeSlider.value, et = +edgeSlider.value;
    document.getElementById('node-threshold-value').textContent = nt.toFixed(2);
    document.getElementById('edge-threshold-value').textContent = et.toFixed(3);
    current = prune(nt, et);
    // A pinned or hovered node that the new pruning drops is let go.
    pinned = pinned.filter(function (i) { return current.nodes[i]; });
    if (hovered >= 0 && !current.nodes[hovered]) hovered = -1;
    draw();
  }
  nodeSlider.value = data.node_threshold;
  edgeSlider.value = data.edge_threshold;
  nodeSlider.addEventListener('input', update);
  edgeSlider.addEventListener('input', update);
  window.addEventListener('resize', function () {
    if (Math.abs(Math.floor(graphDiv.clientWidth) - drawnWidth) > 20) draw();
  });
  update();
  document.body.setAttribute('data-rendered', 'yes');
})();
