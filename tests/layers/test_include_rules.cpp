// The layer rules of docs/architecture.md "Layers", read from that table and checked against the source
// tree and CMakeLists.txt (both under ATTOGRAD_SOURCE_DIR): each folder's files include only the project
// folders and third-party libraries their layer may use, project headers are included by their path from
// the root, no project header includes itself again through others (an include cycle), every header of a
// folder opens the folder's namespace, and each layer's CMake library links exactly what its row allows.
// The table is the one home of the layers; this test and CMakeLists.txt follow it. The CMake libraries
// stop a call upward at link time; the include check stops an include upward, which compiles and links
// whenever the code it reaches is inline.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"

namespace fs = std::filesystem;

namespace {

struct Layer {
  std::string folder;                   // relative to the source root, without the trailing '/'
  std::string name_space;               // the namespace its headers open
  std::string library;                  // its CMake target
  std::set<std::string> may_include;    // project layers (folders), itself included
  std::set<std::string> third_party;    // libraries of its row (docs names: Eigen, nlohmann_json, ...)
  std::vector<std::string> no_library;  // prefixes of <...> includes it must not use
};

// Each third-party library of the table: the prefix of its headers (empty: used through the standard
// library only) and its imported CMake target.
struct ThirdParty {
  std::string include_prefix;
  std::string cmake_target;
};
const std::map<std::string, ThirdParty>& third_party_libraries() {
  static const std::map<std::string, ThirdParty> table = {
      {"Eigen", {"Eigen/", "Eigen3::Eigen"}},
      {"nlohmann_json", {"nlohmann/", "nlohmann_json::nlohmann_json"}},
      {"CLI11", {"CLI/", "CLI11::CLI11"}},
      {"Threads", {"", "Threads::Threads"}},
      {"pybind11", {"pybind11/", "pybind11::module"}},
      {"PCRE2", {"pcre2.h", "PkgConfig::PCRE2"}},
      {"ICU", {"unicode/", "PkgConfig::ICU"}},
  };
  return table;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split_cells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {  // row[0] is the opening '|'
    if (row[i] == '|') {
      const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

// The `quoted` words of a cell, with a trailing '/' dropped ("`nn/`, `autograd/`" -> nn, autograd).
std::vector<std::string> quoted_words(const std::string& cell) {
  std::vector<std::string> out;
  static const std::regex re("`([^`]+)`");
  for (auto it = std::sregex_iterator(cell.begin(), cell.end(), re); it != std::sregex_iterator(); ++it) {
    std::string w = (*it)[1];
    if (!w.empty() && w.back() == '/') w.pop_back();
    out.push_back(w);
  }
  return out;
}

// The table of the "## Layers" section of `doc` (docs/architecture.md), found by its column names. A
// layer's "may include" of "everything above" means every earlier row; its third-party libraries are its
// row's and those of every layer it may include. Throws std::runtime_error naming what is missing.
std::vector<Layer> parse_layers(const std::string& doc) {
  const size_t start = doc.find("\n## Layers\n");
  if (start == std::string::npos) throw std::runtime_error("no \"## Layers\" section");
  const size_t end = doc.find("\n## ", start + 1);
  std::istringstream section(doc.substr(start, end == std::string::npos ? std::string::npos : end - start));
  std::vector<std::string> header;
  std::vector<Layer> layers;
  std::string line;
  while (std::getline(section, line)) {
    if (line.rfind("|", 0) != 0) continue;
    const std::vector<std::string> cells = split_cells(line);
    if (header.empty()) {
      header = cells;
      continue;
    }
    if (line.rfind("|---", 0) == 0) continue;
    auto column = [&](const std::string& name) -> const std::string& {
      const auto it = std::find(header.begin(), header.end(), name);
      if (it == header.end()) throw std::runtime_error("the Layers table has no column \"" + name + "\"");
      const size_t i = static_cast<size_t>(it - header.begin());
      if (i >= cells.size()) throw std::runtime_error("a Layers row has too few cells: " + line);
      return cells[i];
    };
    Layer l;
    const auto folder = quoted_words(column("folder")), ns = quoted_words(column("namespace")),
               lib = quoted_words(column("library"));
    if (folder.size() != 1 || ns.size() != 1 || lib.size() != 1)
      throw std::runtime_error("a Layers row needs one `folder/`, `namespace` and `library`: " + line);
    l.folder = folder[0];
    l.name_space = ns[0];
    l.library = lib[0];
    l.may_include.insert(l.folder);
    if (column("may include (project)") == "everything above") {
      for (const Layer& below : layers) l.may_include.insert(below.folder);
    } else {
      for (const std::string& f : quoted_words(column("may include (project)"))) l.may_include.insert(f);
    }
    std::string libs = column("third-party");
    for (char& c : libs)
      if (c == ',') c = ' ';
    std::istringstream words(libs);
    for (std::string w; words >> w;) {
      if (!third_party_libraries().count(w))
        throw std::runtime_error("unknown third-party library \"" + w + "\" in the Layers table (row " +
                                 l.folder + "/); add it to third_party_libraries()");
      l.third_party.insert(w);
    }
    layers.push_back(l);
  }
  if (layers.empty()) throw std::runtime_error("the Layers section holds no table");
  for (Layer& l : layers) {
    std::set<std::string> libs = l.third_party;
    for (const Layer& other : layers)
      if (l.may_include.count(other.folder)) libs.insert(other.third_party.begin(), other.third_party.end());
    for (const auto& [name, lib] : third_party_libraries())
      if (!libs.count(name) && !lib.include_prefix.empty()) l.no_library.push_back(lib.include_prefix);
    l.third_party = libs;
  }
  return layers;
}

const std::vector<Layer>& layers() {
  static const std::vector<Layer> table =
      parse_layers(read_text(fs::path(ATTOGRAD_SOURCE_DIR) / "docs/architecture.md"));
  return table;
}

// The layer folder a root-relative path lies in ("" for none: tests, bench, ...).
std::string layer_of(const std::string& path) {
  std::string best;
  for (const Layer& l : layers())
    if (path.rfind(l.folder + "/", 0) == 0 && l.folder.size() > best.size()) best = l.folder;
  return best;
}

const Layer* find_layer(const std::string& folder) {
  for (const Layer& l : layers())
    if (l.folder == folder) return &l;
  return nullptr;
}

struct Include {
  int line;
  bool quoted;       // "..." rather than <...>
  std::string path;  // as written
};

std::vector<Include> includes_of(const fs::path& file) {
  static const std::regex re(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> out;
  std::ifstream in(file);
  std::string text;
  int n = 0;
  while (std::getline(in, text)) {
    ++n;
    std::smatch m;
    if (std::regex_search(text, m, re)) out.push_back({n, m[1] == "\"", m[2]});
  }
  return out;
}

// Every .h and .cpp under the layer folders of `root` and their subfolders (train/tasks/), root-relative
// with '/' separators, sorted, each once.
std::vector<std::string> layer_files(const fs::path& root) {
  std::vector<std::string> files;
  for (const Layer& l : layers()) {
    if (!fs::is_directory(root / l.folder)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / l.folder)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".h" || ext == ".cpp"))
        files.push_back(fs::relative(e.path(), root).generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

// One line per broken rule: "FILE:LINE: includes X: WHY".
std::vector<std::string> rule_violations(const fs::path& root) {
  std::vector<std::string> problems;
  for (const std::string& file : layer_files(root)) {
    const Layer& layer = *find_layer(layer_of(file));
    for (const Include& inc : includes_of(root / file)) {
      const std::string where = file + ":" + std::to_string(inc.line) + ": includes " +
                                (inc.quoted ? "\"" + inc.path + "\"" : "<" + inc.path + ">") + ": ";
      if (!inc.quoted) {
        for (const std::string& lib : layer.no_library)
          if (inc.path.rfind(lib, 0) == 0) problems.push_back(where + layer.folder + "/ may not use " + lib);
        continue;
      }
      const std::string target = layer_of(inc.path);
      if (target.empty() || !fs::exists(root / inc.path))
        problems.push_back(where + "not a project header by its path from the root");
      else if (!layer.may_include.count(target))
        problems.push_back(where + layer.folder + "/ may not include " + target + "/");
    }
  }
  return problems;
}

// The include cycles among the project's headers, each as "a.h -> b.h -> a.h" (one per cycle found by a
// depth-first search; a header on several cycles may show only one of them).
std::vector<std::string> include_cycles(const fs::path& root) {
  std::map<std::string, std::vector<std::string>> edges;
  for (const std::string& file : layer_files(root)) {
    if (fs::path(file).extension() != ".h") continue;
    auto& out = edges[file];
    for (const Include& inc : includes_of(root / file))
      if (inc.quoted && !layer_of(inc.path).empty() && fs::exists(root / inc.path)) out.push_back(inc.path);
  }
  std::vector<std::string> cycles;
  std::map<std::string, int> state;  // 0 unseen, 1 on the current path, 2 done
  std::vector<std::string> path;
  std::function<void(const std::string&)> visit = [&](const std::string& h) {
    state[h] = 1;
    path.push_back(h);
    for (const std::string& next : edges[h]) {
      if (state[next] == 1) {
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), next); it != path.end(); ++it)
          cycle += *it + " -> ";
        cycles.push_back(cycle + next);
      } else if (state[next] == 0) {
        visit(next);
      }
    }
    path.pop_back();
    state[h] = 2;
  };
  for (const auto& [h, _] : edges)
    if (state[h] == 0) visit(h);
  return cycles;
}

// One line per header of a layer folder that does not open the folder's namespace ("namespace ns" or
// "namespace ns::inner").
std::vector<std::string> namespace_violations(const fs::path& root) {
  std::vector<std::string> problems;
  for (const std::string& file : layer_files(root)) {
    if (fs::path(file).extension() != ".h") continue;
    const Layer& layer = *find_layer(layer_of(file));
    const std::regex opens("(^|\n)namespace " + layer.name_space + "(::| |\\{)");
    if (!std::regex_search(read_text(root / file), opens))
      problems.push_back(file + ": opens no namespace " + layer.name_space + " (the " + layer.folder +
                         "/ row of the Layers table)");
  }
  return problems;
}

// CMakeLists.txt's target_link_libraries, target -> the targets and libraries it links (any keyword).
std::map<std::string, std::set<std::string>> cmake_links(const std::string& cmake) {
  std::map<std::string, std::set<std::string>> links;
  static const std::regex re(R"(target_link_libraries\(\s*([A-Za-z0-9_:]+)([^)]*)\))");
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), re); it != std::sregex_iterator(); ++it) {
    std::istringstream words((*it)[2].str());
    for (std::string w; words >> w;)
      if (w != "PUBLIC" && w != "PRIVATE" && w != "INTERFACE") links[(*it)[1]].insert(w);
  }
  return links;
}

// One line per layer whose CMake library links (directly or through the libraries it links) other
// project layers or third-party libraries than its row of the table allows.
std::vector<std::string> link_violations(const std::string& cmake) {
  const auto links = cmake_links(cmake);
  std::map<std::string, std::string> folder_of_library, library_of_target;
  for (const Layer& l : layers()) folder_of_library[l.library] = l.folder;
  for (const auto& [name, lib] : third_party_libraries()) library_of_target[lib.cmake_target] = name;
  std::vector<std::string> problems;
  for (const Layer& l : layers()) {
    if (!links.count(l.library)) {
      if (l.may_include.size() > 1 || !l.third_party.empty())
        problems.push_back(l.library + ": links nothing in CMakeLists.txt");
      continue;
    }
    std::set<std::string> folders{l.folder}, libraries, seen;
    std::function<void(const std::string&)> walk = [&](const std::string& target) {
      if (!seen.insert(target).second || !links.count(target)) return;
      for (const std::string& t : links.at(target)) {
        if (folder_of_library.count(t))
          folders.insert(folder_of_library[t]);
        else if (library_of_target.count(t))
          libraries.insert(library_of_target[t]);
        else
          problems.push_back(l.library + ": links " + t + ", which the Layers table does not name");
        walk(t);
      }
    };
    walk(l.library);
    auto list = [](const std::set<std::string>& s) {
      std::string out;
      for (const std::string& x : s) out += (out.empty() ? "" : " ") + x;
      return "{" + out + "}";
    };
    if (folders != l.may_include)
      problems.push_back(l.library + ": links the layers " + list(folders) + ", the table allows " +
                         list(l.may_include));
    if (libraries != l.third_party)
      problems.push_back(l.library + ": links the libraries " + list(libraries) + ", the table gives " +
                         list(l.third_party));
  }
  return problems;
}

// CMakeLists.txt and cmake/python.cmake (the Python module's library, kept in a file of its own).
std::string cmake_text() {
  const fs::path root = ATTOGRAD_SOURCE_DIR;
  return read_text(root / "CMakeLists.txt") + "\n" + read_text(root / "cmake/python.cmake");
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_layer_includes_only_what_it_may) {
  const fs::path root = ATTOGRAD_SOURCE_DIR;
  BOOST_TEST_REQUIRE(layer_files(root).size() >= 50u, "no sources found under " << root);
  const auto problems = rule_violations(root);
  BOOST_TEST(problems.empty(), "include rules broken (docs/architecture.md \"Layers\"):" << joined(problems));
}

BOOST_AUTO_TEST_CASE(every_header_opens_its_layers_namespace) {
  const auto problems = namespace_violations(ATTOGRAD_SOURCE_DIR);
  BOOST_TEST(problems.empty(), "namespaces (docs/architecture.md \"Layers\"):" << joined(problems));
}

BOOST_AUTO_TEST_CASE(each_cmake_library_links_what_its_row_allows) {
  BOOST_TEST_REQUIRE(layers().size() >= 7u);
  const auto problems = link_violations(cmake_text());
  BOOST_TEST(problems.empty(), "CMakeLists.txt against docs/architecture.md \"Layers\":" << joined(problems));
}

// The table reader and the link check, on a made-up table and CMake file.
BOOST_AUTO_TEST_CASE(the_table_reader_and_the_link_check_see_what_they_must) {
  const std::string doc =
      "# x\n\n## Layers\n\ntext\n\n"
      "| folder | namespace | library | holds | may include (project) | third-party |\n"
      "|---|---|---|---|---|---|\n"
      "| `io/` | `io` | `attograd_io` | files | `io/` | nlohmann_json |\n"
      "| `autograd/` | `ag` | `attograd_autograd` | tensors | `autograd/` | Eigen, Threads |\n"
      "| `cli/` | `cli` | the `attograd` program | commands | everything above | CLI11 |\n"
      "\n## Model\n\n| a | b |\n|---|---|\n| `x` | `y` |\n";
  const std::vector<Layer> t = parse_layers(doc);
  BOOST_TEST_REQUIRE(t.size() == 3u);
  BOOST_TEST(t[1].name_space == "ag");
  BOOST_TEST(t[2].library == "attograd");
  BOOST_TEST((t[2].may_include == std::set<std::string>{"cli", "io", "autograd"}));
  BOOST_TEST(
      (t[0].no_library == std::vector<std::string>{"CLI/", "Eigen/", "unicode/", "pcre2.h", "pybind11/"}));
  BOOST_TEST((t[2].third_party == std::set<std::string>{"CLI11", "Eigen", "Threads", "nlohmann_json"}));
  BOOST_CHECK_THROW(parse_layers("## Layers\n| folder | namespace |\n|---|---|\n| `io/` | `io` |\n"),
                    std::runtime_error);
  BOOST_CHECK_THROW(parse_layers(doc.substr(0, doc.find("| `io/`")) +
                                 "| `io/` | `io` | `attograd_io` | files | `io/` | Boost |\n"),
                    std::runtime_error);

  // The real table, against a CMake file where io links Eigen and nn links nothing.
  const std::string cmake = cmake_text();
  BOOST_TEST_REQUIRE(link_violations(cmake).empty(), joined(link_violations(cmake)));
  std::string bad = std::regex_replace(cmake, std::regex(R"(target_link_libraries\(attograd_io PUBLIC )"),
                                       "target_link_libraries(attograd_io PUBLIC Eigen3::Eigen ");
  bad = std::regex_replace(bad, std::regex(R"(target_link_libraries\(attograd_nn [^)]*\))"), "");
  const auto problems = link_violations(bad);
  BOOST_TEST(std::count_if(problems.begin(), problems.end(),
                           [](const std::string& p) {
                             return p.rfind("attograd_io: links the libraries", 0) == 0;
                           }) == 1,
             joined(problems));
  BOOST_TEST(
      std::count(problems.begin(), problems.end(), "attograd_nn: links nothing in CMakeLists.txt") == 1,
      joined(problems));
}

BOOST_AUTO_TEST_CASE(no_include_cycle_among_the_project_headers) {
  const auto cycles = include_cycles(ATTOGRAD_SOURCE_DIR);
  BOOST_TEST(cycles.empty(), "include cycles:" << joined(cycles));
}

// The checker itself, on a small made-up tree: it must see each kind of break, and pass a clean tree.
BOOST_AUTO_TEST_CASE(the_checker_finds_upward_includes_libraries_and_cycles) {
  testing::TempDir tmp("include-rules");
  const fs::path root = tmp.dir;
  write(root / "autograd/tensor.h", "#pragma once\n#include <Eigen/Core>\n");
  write(root / "nn/linear.h", "#pragma once\n#include \"autograd/tensor.h\"\n");
  write(root / "train/config.h", "#pragma once\n#include <nlohmann/json.hpp>\n");
  write(root / "findings/report.h", "#pragma once\n#include \"io/x.h\"\n");
  write(root / "io/x.h", "#pragma once\n");
  BOOST_TEST(rule_violations(root).empty(), joined(rule_violations(root)));
  BOOST_TEST(include_cycles(root).empty());

  write(root / "findings/bad.cpp",
        "#include \"nn/linear.h\"\n#include <Eigen/Core>\n#include \"linear.h\"\n");
  write(root / "autograd/bad.h", "#pragma once\n\n#include \"nn/linear.h\"\n");
  write(root / "train/tasks/bad.cpp", "#include \"findings/report.h\"\n");  // a layer's subfolder
  const auto problems = rule_violations(root);
  BOOST_TEST_REQUIRE(problems.size() == 5u, joined(problems));
  BOOST_TEST(problems[0] == "autograd/bad.h:3: includes \"nn/linear.h\": autograd/ may not include nn/");
  BOOST_TEST(problems[1] == "findings/bad.cpp:1: includes \"nn/linear.h\": findings/ may not include nn/");
  BOOST_TEST(problems[2] == "findings/bad.cpp:2: includes <Eigen/Core>: findings/ may not use Eigen/");
  BOOST_TEST(problems[3] ==
             "findings/bad.cpp:3: includes \"linear.h\": not a project header by its path from the root");
  BOOST_TEST(problems[4] ==
             "train/tasks/bad.cpp:1: includes \"findings/report.h\": train/ may not include findings/");

  // autograd/tensor.h -> nn/linear.h -> autograd/tensor.h: the upward include is also a cycle.
  fs::remove(root / "autograd/bad.h");
  write(root / "autograd/tensor.h", "#pragma once\n#include \"nn/linear.h\"\n");
  const auto cycles = include_cycles(root);
  BOOST_TEST_REQUIRE(cycles.size() == 1u, joined(cycles));
  BOOST_TEST(cycles[0] == "autograd/tensor.h -> nn/linear.h -> autograd/tensor.h");
}
