// The graph viewer page (findings/graph_html.h) without a browser: one self-contained file whose data
// holds every node and every edge of the unpruned graph (not only the kept links), whose token names
// cannot close its script (nor its features' top examples, which it carries), and which names no address
// but the SVG namespace. tests/browser/graph_in_browser.py drives the page itself.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>
#include <regex>

#include "findings/graph_html.h"

namespace {

findings::AttributionGraph tiny_graph() {
  using findings::GraphNodeKind;
  findings::AttributionGraph g;
  g.run = "tiny";
  g.prompt_tokens = {"BOS", "</script><b>"};
  g.n_layers = 1;
  g.nodes = {{GraphNodeKind::feature, 0, 1, 3, "", 0.7, 0.5, true, {{"a", 0.2}}, {{"b", -0.1}}, false, {}},
             {GraphNodeKind::error, 0, 1, -1, "", 0, 0.2, false, {}, {}, false, {}},
             {GraphNodeKind::embedding, -1, 0, 0, "BOS", 0, 0.1, true, {}, {}, false, {}},
             {GraphNodeKind::embedding, -1, 1, 5, "</script><b>", 0, 0.9, true, {}, {}, false, {}},
             {GraphNodeKind::position, -1, 0, -1, "", 0, 0, true, {}, {}, false, {}},
             {GraphNodeKind::position, -1, 1, -1, "", 0, 0, true, {}, {}, false, {}},
             {GraphNodeKind::logit, 1, 1, 7, "x", 0.9, 0, true, {}, {}, false, {}}};
  g.nodes[0].has_page = true;
  g.nodes[0].examples = {{{"x", "<script>alert(1)</script>", "y"}, 1, 2.5}, {{"&amp;", "z"}, 0, 1.25}};
  g.n_features = 1;
  g.n_errors = 1;
  g.n_tokens = 2;
  g.n_logits = 1;
  g.edges = {{3, 0, 1.5}, {0, 6, 2.0}, {1, 6, -0.25}, {2, 6, 0.125}};
  g.unpruned_edges = 4;
  g.links = {{0, 6, 2.0, {{"resid", 1.5}, {"L0.H1", 0.5}}}};
  return g;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_page_carries_the_whole_graph_and_names_no_address) {
  const std::string page = findings::graph_html(tiny_graph());
  const std::string open = "<script type=\"application/json\" id=\"graph-data\">";
  const size_t a = page.find(open);
  BOOST_TEST_REQUIRE(a != std::string::npos);
  const size_t b = page.find("</script>", a);
  const nlohmann::json data = nlohmann::json::parse(page.substr(a + open.size(), b - a - open.size()));
  BOOST_TEST(data["nodes"].size() == 7u);  // the unkept error node too
  BOOST_TEST(data["w"].size() == 4u);      // every edge, not only the kept link
  BOOST_TEST(data["w"][2].get<double>() == -0.25);
  BOOST_TEST(data["src"][1].get<int>() == 0);
  BOOST_TEST(data["tgt"][1].get<int>() == 6);
  BOOST_TEST(data["paths"][0][2][1][0].get<std::string>() == "L0.H1");
  BOOST_TEST(data["prompt"][1].get<std::string>() == "</script><b>");  // read back whole from \u003c
  BOOST_TEST(data["nodes"][0]["up"][0][0].get<std::string>() == "a");
  BOOST_TEST(data["nodes"][3]["id"].get<std::string>() == "E_5_1");
  // The feature's top examples: tokens read back whole, the peak's index and activation.
  BOOST_TEST(data["nodes"][0]["page"].get<bool>());
  BOOST_TEST(data["nodes"][0]["ex"].size() == 2u);
  BOOST_TEST(data["nodes"][0]["ex"][0][0][1].get<std::string>() == "<script>alert(1)</script>");
  BOOST_TEST(data["nodes"][0]["ex"][0][1].get<int>() == 1);
  BOOST_TEST(data["nodes"][0]["ex"][1][2].get<double>() == 1.25);
  BOOST_TEST(!data["nodes"][1].contains("ex"));                   // an error node has no feature page
  BOOST_TEST(page.find("<script>alert") == std::string::npos);    // escaped in the data
  BOOST_TEST(page.find("no feature page") != std::string::npos);  // the read-out's words for a missing page
  // graph.json carries them too, on the feature node.
  findings::AttributionGraph kept = tiny_graph();
  const nlohmann::json gj = findings::graph_to_json(kept);
  BOOST_TEST(gj["nodes"][0]["examples"][0]["tokens"][1].get<std::string>() == "<script>alert(1)</script>");
  BOOST_TEST(gj["nodes"][0]["examples"][0]["peak"].get<int>() == 1);
  BOOST_TEST(gj["nodes"][0]["logit_effects"]["promoted"][0]["token"].get<std::string>() == "a");
  kept.nodes[0].has_page = false;
  kept.nodes[0].examples.clear();
  BOOST_TEST(!findings::graph_to_json(kept)["nodes"][0].contains("examples"));
  // Outside the data, the token name is escaped; no address but the SVG namespace's.
  BOOST_TEST(page.find("</script><b>") == std::string::npos);
  const std::regex address("(https?:)?//[A-Za-z0-9.-]+\\.[a-z]{2,}");
  std::string rest = page;
  for (std::smatch m; std::regex_search(rest, m, address); rest = m.suffix())
    BOOST_TEST(m.str() == "http://www.w3.org", m.str());
  BOOST_TEST(page.find("<script src") == std::string::npos);  // script and style inline, nothing linked
  BOOST_TEST(page.find("<link") == std::string::npos);
  BOOST_TEST(page.find("data-rendered") != std::string::npos);
}
