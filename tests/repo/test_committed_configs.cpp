// Everything a committed config reads is in the repository or installed by scripts/setup, so the README's
// two commands pass on a fresh Debian machine. The test walks every committed config (configs/**/*.json,
// examples/**/*.json, sweeps/*.json, bench/configs/*.json, and any config a sweep's "base" names) and every
// path each names, and the paths that the example notebooks' code cells name. It fails naming the config,
// the field (a JSON pointer) and the missing file. A path outside the repository must be listed in
// scripts/setup's `data_files` with the Debian package that provides it, that package must be in setup's
// `packages`, and where the file is installed `dpkg -S` must name that package.
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kSource = ATTOGRAD_SOURCE_DIR;

// The fields that name a file a config reads, and those that name where a run writes, as JSON pointers.
// A string with a '/' in any other field fails the test, so a new path field is classified here.
const std::set<std::string> kReadFields = {"/task/path", "/base"};
const std::set<std::string> kWrittenFields = {"/output/dir", "/out"};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What scripts/setup promises: the packages it installs, and for each file outside the repository that a
// config reads, the package that provides it.
struct Setup {
  std::set<std::string> packages;
  std::map<std::string, std::string> data_files;  // path -> package
};

// The words of every bash array `NAME=(...)` and `NAME+=(...)` in `script`, comments left out.
std::vector<std::string> array_words(const std::string& script, const std::string& name) {
  std::vector<std::string> words;
  const std::regex opening("(^|\\n)[ \\t]*" + name + "\\+?=\\(");
  for (auto it = std::sregex_iterator(script.begin(), script.end(), opening); it != std::sregex_iterator();
       ++it) {
    size_t at = static_cast<size_t>(it->position() + it->length());
    std::string word;
    bool quoted = false;
    for (; at < script.size(); ++at) {
      const char c = script[at];
      if (c == '"') {
        quoted = !quoted;
      } else if (!quoted && c == '#' && word.empty()) {
        at = script.find('\n', at);
        if (at == std::string::npos) break;
      } else if (!quoted && (c == ' ' || c == '\t' || c == '\n' || c == ')')) {
        if (!word.empty()) words.push_back(word);
        word.clear();
        if (c == ')') break;
      } else {
        word += c;
      }
    }
  }
  return words;
}

Setup parse_setup(const std::string& script) {
  Setup setup;
  for (const std::string& w : array_words(script, "packages")) setup.packages.insert(w);
  for (const std::string& entry : array_words(script, "data_files")) {
    const size_t space = entry.find(' ');
    if (space == std::string::npos) continue;
    setup.data_files[entry.substr(0, space)] = entry.substr(space + 1);
  }
  return setup;
}

// The Debian packages `dpkg -S` names for an installed file ("pkg: /path", "a, b: /path", "pkg:amd64:
// /path").
std::set<std::string> dpkg_packages(const fs::path& file) {
  std::set<std::string> out;
  std::string quoted = "'";
  for (char c : file.string()) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  FILE* pipe = ::popen(("dpkg -S " + quoted + " 2>/dev/null").c_str(), "r");
  if (!pipe) return out;
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  ::pclose(pipe);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos || line.rfind("diversion", 0) == 0) continue;
    std::istringstream names(line.substr(0, colon));
    for (std::string name; std::getline(names, name, ',');) {
      name.erase(0, name.find_first_not_of(' '));
      out.insert(name.substr(0, name.find(':')));
    }
  }
  return out;
}

using PackagesOf = std::function<std::set<std::string>(const fs::path&)>;

// Checks one config file and every path it names; appends each problem as one line. `queue` receives the
// configs in the repository that it names (a sweep's base), so they are checked too.
class Checker {
 public:
  Checker(fs::path repo, Setup setup, PackagesOf packages_of)
      : repo_(std::move(repo)), setup_(std::move(setup)), packages_of_(std::move(packages_of)) {}

  void check_file(const fs::path& config) {
    if (!checked_.insert(fs::weakly_canonical(config)).second) return;
    name_ = fs::relative(config, repo_).generic_string();
    json doc;
    try {
      doc = json::parse(read_text(config));
    } catch (const json::exception& e) {
      problems_.push_back(name_ + ": not JSON: " + e.what());
      return;
    }
    walk(doc, "");
  }

  // A notebook: every string literal in a code cell that names a path in the repository ("configs/x.json",
  // its first folder one of the repository's top-level folders) or under /usr is read like a config's
  // path field.
  void check_notebook(const fs::path& notebook) {
    name_ = fs::relative(notebook, repo_).generic_string();
    json doc;
    try {
      doc = json::parse(read_text(notebook));
    } catch (const json::exception& e) {
      problems_.push_back(name_ + ": not JSON: " + e.what());
      return;
    }
    const std::regex literal(R"re("([^"\\\n]*)"|'([^'\\\n]*)')re");
    const json cells = doc.value("cells", json::array());
    for (size_t i = 0; i < cells.size(); ++i) {
      if (cells[i].value("cell_type", "") != "code") continue;
      std::string source;
      const json& lines = cells[i].value("source", json::array());
      if (lines.is_string()) source = lines.get<std::string>();
      if (lines.is_array())
        for (const json& l : lines) source += l.is_string() ? l.get<std::string>() : "";
      for (auto it = std::sregex_iterator(source.begin(), source.end(), literal);
           it != std::sregex_iterator(); ++it) {
        const std::string text = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
        const size_t slash = text.find('/');
        if (slash == std::string::npos || text.find(' ') != std::string::npos) continue;
        const bool system = text.rfind("/usr/", 0) == 0;
        const std::string first = text.substr(0, slash);
        const bool in_repo = !first.empty() && first[0] != '.' && fs::is_directory(repo_ / first);
        if (system || in_repo) read_path("/cells/" + std::to_string(i), text);
      }
    }
  }

  const std::vector<std::string>& problems() const { return problems_; }
  size_t configs_checked() const { return checked_.size(); }
  size_t paths_checked() const { return paths_; }

 private:
  void walk(const json& j, const std::string& pointer) {
    if (j.is_object()) {
      for (const auto& item : j.items()) {
        const std::string child = pointer + "/" + item.key();
        if (child == "/grid" && item.value().is_object()) {
          grid(item.value());
        } else {
          walk(item.value(), child);
        }
      }
    } else if (j.is_array()) {
      for (size_t i = 0; i < j.size(); ++i) walk(j[i], pointer + "/" + std::to_string(i));
    } else if (j.is_string()) {
      field(pointer, pointer, j.get<std::string>());
    }
  }

  // A sweep's grid: "task.path": [...] sets the field /task/path of the base config to each value.
  void grid(const json& g) {
    for (const auto& item : g.items()) {
      std::string target = "/" + item.key();
      for (char& c : target) c = c == '.' ? '/' : c;
      const json values = item.value().is_array() ? item.value() : json::array({item.value()});
      for (size_t i = 0; i < values.size(); ++i)
        if (values[i].is_string())
          field("/grid/" + item.key() + "/" + std::to_string(i), target, values[i].get<std::string>());
    }
  }

  void field(const std::string& where, const std::string& pointer, const std::string& value) {
    if (kReadFields.count(pointer)) {
      read_path(where, value);
    } else if (!kWrittenFields.count(pointer) && value.find('/') != std::string::npos) {
      problems_.push_back(name_ + ": " + where + " holds \"" + value +
                          "\", which looks like a path in a field this test does not know: add " + pointer +
                          " to kReadFields or kWrittenFields in tests/repo/test_committed_configs.cpp");
    }
  }

  void read_path(const std::string& where, const std::string& value) {
    ++paths_;
    const fs::path named(value);
    const fs::path path = (named.is_absolute() ? named : repo_ / named).lexically_normal();
    const std::string inside = path.lexically_relative(repo_).generic_string();
    const bool in_repo = !inside.empty() && inside.rfind("..", 0) != 0;
    const std::string head = name_ + ": " + where + " names " + value;
    if (in_repo) {
      if (!fs::is_regular_file(path)) {
        problems_.push_back(head + ", which is not a file in the repository");
      } else if (path.extension() == ".json") {
        const std::string saved = name_;
        check_file(path);
        name_ = saved;
      }
      return;
    }
    const auto listed = setup_.data_files.find(path.string());
    if (listed == setup_.data_files.end()) {
      problems_.push_back(head + ", which is outside the repository and not in scripts/setup's data_files" +
                          " (a committed config reads only the repository's files and files of a Debian" +
                          " package that scripts/setup installs)");
      return;
    }
    const std::string& package = listed->second;
    if (!setup_.packages.count(package))
      problems_.push_back(head + ": scripts/setup's data_files says package " + package +
                          " provides it, but its packages do not include " + package);
    if (!fs::is_regular_file(path)) {
      problems_.push_back(head + ", which is missing: Debian's package " + package +
                          " provides it; run scripts/setup");
      return;
    }
    const std::set<std::string> owners = packages_of_(path);
    if (!owners.count(package)) {
      std::string names;
      for (const std::string& o : owners) names += (names.empty() ? "" : ", ") + o;
      problems_.push_back(head + ": scripts/setup says package " + package + " provides it, dpkg -S says " +
                          (names.empty() ? "no package" : names));
    }
  }

  fs::path repo_;
  Setup setup_;
  PackagesOf packages_of_;
  std::set<fs::path> checked_;
  std::vector<std::string> problems_;
  std::string name_;
  size_t paths_ = 0;
};

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

// A scratch repository in a fresh folder, `root`, and a folder beside it that stands for the system's.
struct Scratch {
  fs::path base = fs::temp_directory_path() / ("attograd-committed-configs-" + std::to_string(::getpid()));
  fs::path root = base / "repo";
  fs::path outside = base / "usr";
  Scratch() {
    fs::remove_all(base);
    fs::create_directories(root);
    fs::create_directories(outside);
  }
  ~Scratch() { fs::remove_all(base); }
  fs::path write(const fs::path& where, const std::string& text) const {
    const fs::path p = where.is_absolute() ? where : root / where;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(setup_arrays_parse) {
  const Setup s = parse_setup(
      "packages=(g++ cmake  # a comment (with parentheses)\n          python3-dev)\n"
      "packages+=(slurmd munge)\n"
      "data_files=(\"/usr/share/x/y pkg-y\"  # y\n  \"/usr/share/z pkgz\")\n"
      "for f in \"${data_files[@]}\"; do :; done\n");
  BOOST_TEST(s.packages == (std::set<std::string>{"g++", "cmake", "python3-dev", "slurmd", "munge"}));
  BOOST_TEST(s.data_files.size() == 2u);
  BOOST_TEST(s.data_files.at("/usr/share/x/y") == "pkg-y");
  BOOST_TEST(s.data_files.at("/usr/share/z") == "pkgz");
}

BOOST_AUTO_TEST_CASE(each_kind_of_problem_names_the_config_the_field_and_the_file) {
  const Scratch repo;
  // A file outside the scratch repository that exists (a package's file, installed) and one that does not.
  const fs::path installed = repo.write(repo.outside / "text", "abc");
  const fs::path missing = repo.outside / "none";
  Setup setup;
  setup.packages = {"good-pkg"};
  setup.data_files = {{installed.string(), "good-pkg"}, {missing.string(), "good-pkg"}};
  const auto check = [&](const std::string& text, const std::string& owner) {
    const fs::path config = repo.write("configs/c.json", text);
    Checker checker(repo.root, setup, [&](const fs::path&) { return std::set<std::string>{owner}; });
    checker.check_file(config);
    return checker.problems();
  };
  repo.write("data/ok.jsonl", "{}\n");
  BOOST_TEST(check(R"({"task": {"path": "data/ok.jsonl"}, "output": {"dir": "runs/x"}})", "").empty());
  BOOST_TEST(check(R"({"task": {"path": ")" + installed.string() + R"("}})", "good-pkg").empty());

  auto p = check(R"({"task": {"path": "data/none.jsonl"}})", "");
  BOOST_REQUIRE_EQUAL(p.size(), 1u);
  BOOST_TEST(p[0] ==
             "configs/c.json: /task/path names data/none.jsonl, which is not a file in the repository");

  p = check(R"({"task": {"path": ")" + missing.string() + R"("}})", "");
  BOOST_REQUIRE_EQUAL(p.size(), 1u);
  BOOST_TEST(p[0] == "configs/c.json: /task/path names " + missing.string() +
                         ", which is missing: Debian's package good-pkg provides it; run scripts/setup");

  p = check(R"({"task": {"path": "/etc/attograd-not-listed"}})", "");
  BOOST_REQUIRE_EQUAL(p.size(), 1u);
  BOOST_TEST(p[0].find("configs/c.json: /task/path names /etc/attograd-not-listed, which is outside the "
                       "repository and not in scripts/setup's data_files") == 0u);

  p = check(R"({"task": {"path": ")" + installed.string() + R"("}})", "other-pkg");
  BOOST_REQUIRE_EQUAL(p.size(), 1u);
  BOOST_TEST(p[0] == "configs/c.json: /task/path names " + installed.string() +
                         ": scripts/setup says package good-pkg provides it, dpkg -S says other-pkg");

  setup.packages.clear();
  p = check(R"({"task": {"path": ")" + installed.string() + R"("}})", "good-pkg");
  BOOST_REQUIRE_EQUAL(p.size(), 1u);
  BOOST_TEST(p[0].find("but its packages do not include good-pkg") != std::string::npos);
  setup.packages = {"good-pkg"};

  // A sweep: its base is checked and walked, and a grid value of a read field is a path too.
  p = check(R"({"base": "configs/base.json", "grid": {"task.path": ["data/ok.jsonl", "data/gone"]},
                "out": "runs/s"})",
            "");
  BOOST_REQUIRE_EQUAL(p.size(), 2u);
  BOOST_TEST(p[0] == "configs/c.json: /base names configs/base.json, which is not a file in the repository");
  BOOST_TEST(p[1] ==
             "configs/c.json: /grid/task.path/1 names data/gone, which is not a file in the repository");
  repo.write("configs/base.json", R"({"task": {"path": "data/absent"}})");
  p = check(R"({"base": "configs/base.json", "grid": {"task.path": ["data/ok.jsonl", "data/gone"]}})", "");
  BOOST_REQUIRE_EQUAL(p.size(), 2u);
  BOOST_TEST(p[0] ==
             "configs/base.json: /task/path names data/absent, which is not a file in the repository");
  BOOST_TEST(p[1] ==
             "configs/c.json: /grid/task.path/1 names data/gone, which is not a file in the repository");

  // A notebook's code cells: literals naming a repository path or one under /usr.
  const fs::path nb = repo.write("examples/n.ipynb", R"({"cells": [
      {"cell_type": "markdown", "source": ["see \"data/missing\""]},
      {"cell_type": "code", "source": ["run = train(\"data/ok.jsonl\")\n", "x = 'data/gone.json'\n",
                                       "y = \"a/b\"; w = \"../..\"; z = \"/usr/none\""]}]})");
  {
    Checker checker(repo.root, setup, [](const fs::path&) { return std::set<std::string>{}; });
    checker.check_notebook(nb);
    p = checker.problems();
  }
  BOOST_REQUIRE_EQUAL(p.size(), 2u);
  BOOST_TEST(p[0] ==
             "examples/n.ipynb: /cells/1 names data/gone.json, which is not a file in the repository");
  BOOST_TEST(p[1].find("examples/n.ipynb: /cells/1 names /usr/none, which is outside the repository") == 0u);

  // A path in a field the test does not know is reported rather than passed over.
  p = check(R"({"task": {"vocab_file": "data/ok.jsonl"}})", "");
  BOOST_REQUIRE_EQUAL(p.size(), 1u);
  BOOST_TEST(p[0].find("configs/c.json: /task/vocab_file holds \"data/ok.jsonl\", which looks like a path") ==
             0u);
}

BOOST_AUTO_TEST_CASE(every_path_a_committed_config_names_is_in_the_repo_or_installed_by_setup) {
  const std::string script = read_text(kSource / "scripts/setup");
  BOOST_REQUIRE_MESSAGE(!script.empty(), "scripts/setup: cannot read");
  const Setup setup = parse_setup(script);
  BOOST_REQUIRE_MESSAGE(setup.packages.count("cmake"), "scripts/setup: found no packages=(...) array");
  Checker checker(kSource, setup, dpkg_packages);
  std::vector<fs::path> configs;
  for (const char* folder : {"configs", "examples"})
    for (const auto& e : fs::recursive_directory_iterator(kSource / folder))
      if (e.is_regular_file() && e.path().extension() == ".json") configs.push_back(e.path());
  for (const char* folder : {"sweeps", "bench/configs"})
    for (const auto& e : fs::directory_iterator(kSource / folder))
      if (e.is_regular_file() && e.path().extension() == ".json") configs.push_back(e.path());
  std::sort(configs.begin(), configs.end());
  for (const fs::path& c : configs) checker.check_file(c);
  for (const auto& e : fs::recursive_directory_iterator(kSource / "examples"))
    if (e.is_regular_file() && e.path().extension() == ".ipynb") checker.check_notebook(e.path());
  BOOST_TEST(checker.configs_checked() >= 16u);  // 10 in configs/, 3 sweeps, 3 bench configs today
  BOOST_TEST(checker.paths_checked() >= 6u);     // two task.path, three sweep bases, the notebook's config
  BOOST_TEST(checker.problems().empty(),
             "committed configs name files a fresh machine lacks:" << joined(checker.problems()));
}
