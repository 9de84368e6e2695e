// The layer rules of docs/architecture.md "Layers", read off the source tree (ATTOGRAD_SOURCE_DIR): each
// folder's files include only the project folders and third-party libraries their layer may use, project
// headers are included by their path from the root, and no project header includes itself again through
// others (an include cycle). The CMake libraries stop a call upward at link time; this stops an include
// upward, which compiles and links whenever the code it reaches is inline.
#define BOOST_TEST_MODULE include_rules
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
  std::string folder;                   // relative to the source root
  std::set<std::string> may_include;    // project layers (folders)
  std::vector<std::string> no_library;  // prefixes of <...> includes it must not use
};

// The table of docs/architecture.md "Layers". A file belongs to the longest folder that holds it.
const std::vector<Layer>& layers() {
  static const std::vector<Layer> table = {
      {"io", {"io"}, {"Eigen/", "CLI/"}},
      {"autograd", {"autograd"}, {"nlohmann/", "CLI/"}},
      {"nn", {"nn", "autograd"}, {"nlohmann/", "CLI/"}},
      {"train", {"train", "nn", "autograd", "io"}, {"CLI/"}},
      {"study/view", {"study/view", "io"}, {"Eigen/", "CLI/"}},
      {"study", {"study", "study/view", "train", "nn", "autograd", "io"}, {"CLI/"}},
      {"cli", {"cli", "study", "study/view", "train", "nn", "autograd", "io"}, {}},
  };
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
// with '/' separators, sorted, each once (study/view/ lies under study/ too).
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
  write(root / "study/view/report.h", "#pragma once\n#include \"io/x.h\"\n");
  write(root / "io/x.h", "#pragma once\n");
  BOOST_TEST(rule_violations(root).empty(), joined(rule_violations(root)));
  BOOST_TEST(include_cycles(root).empty());

  write(root / "study/view/bad.cpp",
        "#include \"nn/linear.h\"\n#include <Eigen/Core>\n#include \"linear.h\"\n");
  write(root / "autograd/bad.h", "#pragma once\n\n#include \"nn/linear.h\"\n");
  write(root / "train/tasks/bad.cpp", "#include \"study/view/report.h\"\n");  // a layer's subfolder
  const auto problems = rule_violations(root);
  BOOST_TEST_REQUIRE(problems.size() == 5u, joined(problems));
  BOOST_TEST(problems[0] == "autograd/bad.h:3: includes \"nn/linear.h\": autograd/ may not include nn/");
  BOOST_TEST(problems[1] ==
             "study/view/bad.cpp:1: includes \"nn/linear.h\": study/view/ may not include nn/");
  BOOST_TEST(problems[2] == "study/view/bad.cpp:2: includes <Eigen/Core>: study/view/ may not use Eigen/");
  BOOST_TEST(problems[3] ==
             "study/view/bad.cpp:3: includes \"linear.h\": not a project header by its path from the root");
  BOOST_TEST(problems[4] ==
             "train/tasks/bad.cpp:1: includes \"study/view/report.h\": train/ may not include study/view/");

  // autograd/tensor.h -> nn/linear.h -> autograd/tensor.h: the upward include is also a cycle.
  fs::remove(root / "autograd/bad.h");
  write(root / "autograd/tensor.h", "#pragma once\n#include \"nn/linear.h\"\n");
  const auto cycles = include_cycles(root);
  BOOST_TEST_REQUIRE(cycles.size() == 1u, joined(cycles));
  BOOST_TEST(cycles[0] == "autograd/tensor.h -> nn/linear.h -> autograd/tensor.h");
}
