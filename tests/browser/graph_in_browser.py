#!/usr/bin/env python3
"""The attribution graph viewer (graph.html) in a real browser (headless Chromium through selenium).

Trains a small induction model with MLPs (a few seconds), its transcoders and one graph, and checks the
viewer as a reader meets it: the page's own pruning at the saved thresholds keeps exactly graph.json's
nodes and links; hovering a node reads out its label, activation, influence, logit effects and (a
feature) its top examples from the transcoder's feature page, and highlights its edges; a click pins it
(the read-out stays when the pointer leaves) and a second click unpins it; the sliders re-prune (fewer
nodes and edges at lower thresholds, more at 1); the run's report links the viewer; and, as for the report (report_in_browser.py, whose helpers this reuses): no
console message, no request other than file: and data:, every SVG drawn with no text outside it, no
horizontal page scroll at 800 px. Screenshots at 1,400 and 800 px go to OUT.

  graph_in_browser.py --attograd build/attograd --out DIR     the whole test (ctest runs this)
  graph_in_browser.py --graph RUN/graphs/NAME/graph.html --out DIR [--width W] [--pin NODE_ID ...]
        only the page checks on a given page, and a screenshot at W px with those nodes pinned

Needs Debian's chromium, chromium-driver and python3-selenium (scripts/setup installs them).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_in_browser as rb  # noqa: E402  (the browser, the log and layout checks)

check = rb.check


def make_graph(attograd, work):
    """A small trained induction run with MLPs, its transcoders and one saved graph."""
    config = {
        "name": "browser-graph", "seed": 3,
        "task": {"kind": "induction", "vocab": 12, "length": 8},
        "model": {"d_model": 16, "n_heads": 2, "n_layers": 2, "d_ff": 32},
        "train": {"steps": 300, "batch_size": 16, "lr": 0.01, "warmup": 20, "threads": 1,
                  "eval_every": 100, "log_every": 50},
        "output": {"attention_every": 0, "probes": 1, "checkpoint_every": 300},
    }
    cfg = os.path.join(work, "config.json")
    with open(cfg, "w") as f:
        json.dump(config, f)
    sae = os.path.join(work, "transcoder.json")
    with open(sae, "w") as f:
        json.dump({"steps": 300, "batch_size": 128, "buffer_tokens": 4096, "eval_sequences": 32,
                   "expansion": 4, "skip": True}, f)
    run_dir = os.path.join(work, "run")
    rb.run([attograd, "train", cfg, "--out", run_dir])
    rb.run([attograd, "transcoder", run_dir, "--config", sae])
    rb.run([attograd, "graph", run_dir, "--tokens", "BOS 1 4 3 7 2 1 4 3 7", "--save", "ind"])
    return run_dir, os.path.join(run_dir, "graphs", "ind", "graph.html")


def counts(driver):
    return driver.execute_script(
        "return [document.querySelectorAll('#nodes .node').length, document.querySelectorAll('#edges .edge').length,"
        " document.getElementById('kept-counts').textContent]")


def set_slider(driver, name, value):
    driver.execute_script("var s = document.getElementById(arguments[0]); s.value = arguments[1];"
                          " s.dispatchEvent(new Event('input'));", name, value)


def info_title(driver):
    return driver.execute_script("var h = document.querySelector('#node-info h3'); return h ? h.textContent : '';")


def check_viewer(driver, path, saved):
    driver.get_log("browser"), driver.get_log("performance")
    rb.open_page(driver, path, 1400)
    n, m, text = counts(driver)
    check(n == len(saved["nodes"]) and m == len(saved["links"]),
          "graph: the page's pruning at the saved thresholds keeps graph.json's %d nodes and %d links (%d, %d; %r)"
          % (len(saved["nodes"]), len(saved["links"]), n, m, text))
    ids = set(driver.execute_script("return Array.prototype.map.call(document.querySelectorAll('#nodes .node'),"
                                    " function (x) { return x.getAttribute('data-id'); })"))
    check(ids == {x["node_id"] for x in saved["nodes"]}, "graph: the drawn nodes are graph.json's nodes")

    # Hover: the strongest feature feeding a logit (else any feature, else any node).
    links = sorted(saved["links"], key=lambda l: -abs(l["weight"]))
    kinds = {x["node_id"]: x["feature_type"] for x in saved["nodes"]}
    feats = [l["source"] for l in links if kinds[l["source"]] == "cross layer transcoder"]
    node_id = feats[0] if feats else links[0]["source"]
    node = driver.find_element(By.CSS_SELECTOR, "#nodes .node[data-id='%s']" % node_id)
    label = node.find_element(By.TAG_NAME, "title").get_attribute("textContent")
    ActionChains(driver).move_to_element(node).perform()
    info = driver.find_element(By.ID, "node-info").text
    near = driver.execute_script("return document.querySelectorAll('#edges .edge.near').length")
    check(info_title(driver) == label and "influence" in info and (not feats or ("activation" in info and "raises" in info)),
          "graph: hovering %s reads out its label, influence%s (%r)" % (node_id, ", activation and logit effects" if feats else "", info[:160]))
    check(near >= 1 and "hover" in node.get_attribute("class"), "graph: hovering highlights the node and its %d edges" % near)
    # A feature's read-out shows its top examples from the transcoder's feature page, the peak token boxed.
    if feats:
        saved_node = next(x for x in saved["nodes"] if x["node_id"] == node_id)
        ex = saved_node.get("examples")
        boxed = driver.execute_script("return Array.prototype.map.call(document.querySelectorAll('#node-info .ex b'),"
                                      " function (x) { return x.textContent; })")
        if ex:
            check("top examples" in info and boxed == [e["tokens"][e["peak"]] for e in ex],
                  "graph: hovering %s shows its %d top examples, peaks boxed (%r)" % (node_id, len(ex), boxed))
        else:
            check(ex == [] and "no examples on the feature page" in info,
                  "graph: a feature without examples says so (%r)" % info[-80:])
    # Pin, then move away: the read-out stays on the pinned node.
    node.click()
    ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
    check(info_title(driver) == label + " (pinned)" and "pinned" in node.get_attribute("class"),
          "graph: a click pins the node; its read-out stays when the pointer leaves (%r)" % info_title(driver))
    node.click()
    ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
    check(info_title(driver) == "" and "pinned" not in node.get_attribute("class"),
          "graph: a second click unpins it (%r)" % info_title(driver))

    # Sliders: re-pruned from the full data.
    set_slider(driver, "edge-threshold", 0.5)
    n1, m1, t1 = counts(driver)
    check(m1 < m and n1 <= n, "graph: edge threshold 0.5 keeps fewer edges (%d -> %d; %r)" % (m, m1, t1))
    # Only features and error nodes are pruned (embeddings, positions and logits always stay): a graph
    # without them (an attention-only model's, given with --graph) keeps its node count.
    prunable = saved["metadata"]["n_features"] + saved["metadata"]["n_errors"] > 0
    set_slider(driver, "node-threshold", 0.3)
    n2, m2, t2 = counts(driver)
    check(n2 < n1 if prunable else n2 == n1, "graph: node threshold 0.3 keeps %s nodes (%d -> %d; %r)"
          % ("fewer" if prunable else "as many", n1, n2, t2))
    set_slider(driver, "edge-threshold", 1)
    set_slider(driver, "node-threshold", 1)
    n3, m3, t3 = counts(driver)
    check((n3 > n if prunable else n3 == n) and m3 > m,
          "graph: thresholds 1 keep more edges%s (%d, %d; %r)" % (" and nodes" if prunable else "", n3, m3, t3))
    # A slider step re-prunes the full graph and redraws: timed (the best of 5, a forced layout included).
    ms = driver.execute_script("""
      var s = document.getElementById('edge-threshold'), best = Infinity;
      for (var r = 0; r < 5; r++) {
        var t0 = performance.now();
        s.value = r % 2 ? 0.9 : 0.95; s.dispatchEvent(new Event('input'));
        void document.body.offsetHeight;
        best = Math.min(best, performance.now() - t0);
      }
      return best;""")
    print("re-prune and redraw of %d nodes and %d edges: %.1f ms (best of 5)" % (
        saved["metadata"]["unpruned_nodes"], saved["metadata"]["unpruned_edges"], ms), flush=True)
    check(ms < 500, "graph: a slider step re-prunes and redraws in %.1f ms (< 500)" % ms)
    set_slider(driver, "edge-threshold", 1)
    label_text = driver.execute_script("return document.getElementById('node-threshold-value').textContent")
    check(label_text == "1.00", "graph: the slider's value is shown (%r)" % label_text)


def screenshot(driver, path, out_dir, width, pins):
    rb.open_page(driver, path, width)
    for node_id in pins:
        driver.find_element(By.CSS_SELECTOR, "#nodes .node[data-id='%s']" % node_id).click()
    ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, height + 20)
    shot = os.path.join(out_dir, "graph-shot-%d.png" % width)
    driver.save_screenshot(shot)
    print("screenshot " + shot, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attograd", help="the attograd binary (trains the run, its transcoders and a graph)")
    ap.add_argument("--graph", help="check this graph.html only")
    ap.add_argument("--width", type=int, default=1000, help="with --graph: the screenshot's width")
    ap.add_argument("--pin", nargs="*", default=[], help="with --graph: node ids pinned in the screenshot")
    ap.add_argument("--out", required=True, help="folder for the run and screenshots")
    a = ap.parse_args()
    t0 = time.monotonic()
    out_dir = os.path.abspath(a.out)
    os.makedirs(out_dir, exist_ok=True)
    run_dir = None
    if a.graph:
        page = a.graph
    else:
        if not a.attograd:
            sys.exit("give --attograd or --graph")
        work = os.path.join(out_dir, "work")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        run_dir, page = make_graph(os.path.abspath(a.attograd), work)
    with open(os.path.join(os.path.dirname(page), "graph.json")) as f:
        saved = json.load(f)
    profile = tempfile.mkdtemp(prefix="attograd-chromium-")
    driver = rb.browser(profile)
    try:
        if a.graph:
            screenshot(driver, page, out_dir, a.width, a.pin)
        check_viewer(driver, page, saved)
        rb.check_page_common(driver, "graph", page, out_dir)
        rb.check_logs(driver, "graph")
        if run_dir:
            report = os.path.join(run_dir, "report.html")
            driver.get("file://" + report)
            hrefs = driver.execute_script("return Array.prototype.map.call(document.querySelectorAll('#graphs a'),"
                                          " function (a) { return a.getAttribute('href'); })")
            check(hrefs == ["graphs/ind/graph.html"], "report: the graphs section links the viewer (%r)" % hrefs)
            rb.check_logs(driver, "report with a graph")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    print("%d checks failed; %.1f s" % (len(rb.failures), time.monotonic() - t0), flush=True)
    return 1 if rb.failures else 0


if __name__ == "__main__":
    sys.exit(main())
