// Readers ask the model's view, never reach into it: every source file of a layer above the model's own (the
// folders of docs/architecture.md's Layers table other than io/, autograd/, nn/ and train/) reads a
// CausalLM through nn/model_view.h only. Outside comments and string literals, such a file may not name a
// block's members (`.attn`, `.mlp`, `->blocks`, the weights `.wq` .. `.fc2`, `.gate`, `.tok_emb`, `.pos_emb`,
// `.lm_head`, `.q_norm`, `.k_norm`) nor the norms `ln1`, `ln2`, `ln_f`. So a model option that changes what
// a reader sees is stated once, in the view, and no reader has to learn it.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The layers the model lives in and below: they build and train it, and may name its members.
const std::set<std::string> kModelLayers = {"io", "autograd", "nn", "train"};
// Files of a reader folder that are the model's own modules under another name: python/nn.cpp binds nn's
// modules (Linear, TransformerBlock, CausalLM.blocks) as Python objects; it reads no model, it is one.
const std::set<std::string> kModuleBindings = {"python/nn.cpp"};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `text` with comments removed and every string or character literal (raw strings too) emptied; newlines
// are kept, so line numbers stay.
std::string code_only(const std::string& text) {
  std::string out;
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < n && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? n : end + 2;
      for (; i < stop; ++i)
        if (text[i] == '\n') out += '\n';
    } else if (text.compare(i, 2, "R\"") == 0 &&
               (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1])))) {
      const size_t paren = text.find('(', i + 2);
      const std::string close = ")" + text.substr(i + 2, paren - i - 2) + "\"";
      const size_t end = text.find(close, paren);
      const size_t stop = end == std::string::npos ? n : end + close.size();
      out += "\"\"";
      for (; i < stop; ++i)
        if (text[i] == '\n') out += '\n';
    } else if (text[i] == '"' || text[i] == '\'') {
      const char quote = text[i++];
      while (i < n && text[i] != quote) i += text[i] == '\\' ? 2 : 1;
      ++i;
      out += quote;
      out += quote;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// Each "FILE:LINE: text" of `text` (a file's code) that names a block's member or a norm.
std::vector<std::string> reaches_into_model(const std::string& file, const std::string& text) {
  static const std::regex member(
      R"((\.|->)\s*(attn|mlp|blocks|wq|wk|wv|wo|fc1|fc2|gate|tok_emb|pos_emb|lm_head|q_norm|k_norm)\b|\b(ln1|ln2|ln_f)\b)");
  std::vector<std::string> out;
  std::istringstream lines(code_only(text));
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number)
    if (std::regex_search(line, member)) out.push_back(file + ":" + std::to_string(number) + ": " + line);
  return out;
}

// The folders of the Layers table in docs/architecture.md, in its order.
std::vector<std::string> layer_folders() {
  const std::string doc = read_text(fs::path(ATTOGRAD_SOURCE_DIR) / "docs/architecture.md");
  const size_t start = doc.find("\n## Layers\n");
  BOOST_REQUIRE(start != std::string::npos);
  const size_t end = doc.find("\n## ", start + 1);
  const std::string section = doc.substr(start, end == std::string::npos ? std::string::npos : end - start);
  static const std::regex row(R"(\n\| `([a-z_]+)/` \|)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1]);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_check_finds_a_reach_and_ignores_names_in_text) {
  BOOST_TEST(reaches_into_model("a.cpp", "x = model.blocks[0]->attn.wq.weight;").size() == 1u);
  BOOST_TEST(reaches_into_model("a.cpp", "const auto& n = *model.ln_f;").size() == 1u);
  BOOST_TEST(reaches_into_model("a.cpp", "if (block->mlp) f();").size() == 1u);
  BOOST_TEST(reaches_into_model("a.cpp", "VectorXd ln1 = w;").size() == 1u);
  // Hook-point names, parameter names in strings, comments and the view's own members are not reaches.
  const std::string fine =
      "hooks.capture(\"blocks.0.ln1.scale\");  // reads ln_f's scale\n"
      "/* model.blocks[0]->attn */ const char* s = R\"x(a.attn.wq)x\";\n"
      "v.layers[0].attention.query.weight; v.final_read.norm; Point::ln1_scale; b.mlp_in; m.attn_norm;\n";
  BOOST_TEST(reaches_into_model("a.cpp", fine).empty());
}

BOOST_AUTO_TEST_CASE(readers_read_the_model_through_its_view) {
  const fs::path root(ATTOGRAD_SOURCE_DIR);
  const std::vector<std::string> folders = layer_folders();
  BOOST_REQUIRE(folders.size() >= 6u);  // io, autograd, nn, train, findings, and the study's rooms above
  std::vector<std::string> found;
  int readers = 0;
  for (const std::string& folder : folders) {
    if (kModelLayers.count(folder)) continue;
    for (const auto& entry : fs::directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h") continue;
      const std::string name = folder + "/" + entry.path().filename().string();
      if (kModuleBindings.count(name)) continue;
      ++readers;
      for (const std::string& f : reaches_into_model(name, read_text(entry.path()))) found.push_back(f);
    }
  }
  BOOST_TEST(readers > 50);
  for (const std::string& f : found) BOOST_ERROR("reaches into the model (read nn/model_view.h): " << f);
}
