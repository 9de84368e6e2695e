// The README's code map (the code block of its "## Read the code" section) against the tree: one entry
// per top-level folder ("name/" at the start of a line), and the docs/ entry naming every docs/*.md. A
// folder or a doc the map lacks fails, and so does an entry for a folder or a doc that does not exist.
// The folders are those on disk, less .git and what .gitignore leaves out (build*/, runs/, ...). And every
// docs/*.md stays under 400 lines: a page a newcomer reads, split when it grows past that.
#include <fnmatch.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using Names = std::set<std::string>;

const fs::path kSource = ATTOGRAD_SOURCE_DIR;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The code map: each entry's folder name (without the '/') and the text of its lines.
std::map<std::string, std::string> parse_map(const std::string& readme) {
  std::map<std::string, std::string> entries;
  bool in_section = false, in_block = false;
  std::string* current = nullptr;
  const std::regex entry("^([^ /]+)/( .*)?$");
  for (const std::string& line : lines_of(readme)) {
    if (!in_block && line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line == "## Read the code";
      continue;
    }
    if (!in_section) continue;
    if (line.rfind("```", 0) == 0) {
      if (in_block) break;  // the section's first code block is the map
      in_block = true;
      continue;
    }
    if (!in_block) continue;
    std::smatch m;
    if (std::regex_match(line, m, entry)) {
      current = &entries[m[1].str()];
      *current = m[2].str();
    } else if (current) {
      *current += "\n" + line;
    }
  }
  return entries;
}

// The file names "*.md" in `text` (a docs/ entry), e.g. "architecture.md".
Names md_names(const std::string& text) {
  Names out;
  const std::regex md("[A-Za-z0-9_-]+\\.md\\b");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), md); it != std::sregex_iterator(); ++it)
    out.insert(it->str());
  return out;
}

// The top-level folders of `root`, less .git and the folder patterns of its .gitignore ("build*/").
Names top_level_folders(const fs::path& root) {
  std::vector<std::string> ignored;
  for (const std::string& line : lines_of(read_text(root / ".gitignore")))
    if (!line.empty() && line[0] != '#' && line.back() == '/')
      ignored.push_back(line.substr(0, line.size() - 1));
  Names out;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!e.is_directory()) continue;
    const std::string name = e.path().filename().string();
    bool skip = name == ".git";
    for (const std::string& pattern : ignored)
      skip = skip || ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
    if (!skip) out.insert(name);
  }
  return out;
}

Names md_files(const fs::path& folder) {
  Names out;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.is_regular_file() && e.path().extension() == ".md") out.insert(e.path().filename().string());
  return out;
}

// Every difference between the map and the tree, one line each.
std::vector<std::string> problems(const std::map<std::string, std::string>& map, const Names& folders,
                                  const Names& docs) {
  std::vector<std::string> out;
  const std::string where = "README.md's code map (\"## Read the code\")";
  for (const std::string& f : folders)
    if (!map.count(f)) out.push_back(where + " has no entry for the folder " + f + "/");
  for (const auto& [f, text] : map)
    if (!folders.count(f))
      out.push_back(where + " has an entry for " + f + "/, which is not a folder of the repository");
  const auto d = map.find("docs");
  const Names named = d == map.end() ? Names{} : md_names(d->second);
  for (const std::string& doc : docs)
    if (!named.count(doc)) out.push_back(where + ": its docs/ entry does not name docs/" + doc);
  for (const std::string& doc : named)
    if (!docs.count(doc))
      out.push_back(where + ": its docs/ entry names " + doc + ", which docs/ does not hold");
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_map_parses_and_each_difference_is_named) {
  const auto map = parse_map(
      "# x\n\n## Read the code\n\nintro naming fake/ and not.md\n\n```\nio/          files, see "
      "docs/python.md\n"
      "             more of io\nnn/\ndocs/        architecture.md (the contract), cli.md,\n"
      "             gone.md\n```\n\n```\nlater/  not the map\n```\n## Next\n\nafter/  no\n");
  BOOST_TEST(map.size() == 3u);
  BOOST_TEST(map.count("io"));
  BOOST_TEST(map.count("nn"));
  BOOST_TEST(map.at("io").find("more of io") != std::string::npos);
  BOOST_TEST(md_names(map.at("docs")) == Names({"architecture.md", "cli.md", "gone.md"}));

  const auto p =
      problems(map, Names{"io", "nn", "docs", "scripts"}, Names{"architecture.md", "cli.md", "new.md"});
  BOOST_REQUIRE_EQUAL(p.size(), 3u);
  BOOST_TEST(p[0] == "README.md's code map (\"## Read the code\") has no entry for the folder scripts/");
  BOOST_TEST(p[1] ==
             "README.md's code map (\"## Read the code\"): its docs/ entry does not name docs/new.md");
  BOOST_TEST(p[2] ==
             "README.md's code map (\"## Read the code\"): its docs/ entry names gone.md, which docs/ does "
             "not hold");
  const auto q = problems(map, Names{"io", "docs"}, Names{"architecture.md", "cli.md", "gone.md"});
  BOOST_REQUIRE_EQUAL(q.size(), 1u);
  BOOST_TEST(q[0] ==
             "README.md's code map (\"## Read the code\") has an entry for nn/, which is not a folder of the "
             "repository");
}

BOOST_AUTO_TEST_CASE(the_readme_lists_every_folder_and_every_doc) {
  const std::string readme = read_text(kSource / "README.md");
  BOOST_REQUIRE_MESSAGE(!readme.empty(), "README.md: cannot read");
  const auto map = parse_map(readme);
  BOOST_REQUIRE_MESSAGE(map.size() >= 5u, "README.md: found no code map under \"## Read the code\"");
  const Names folders = top_level_folders(kSource);
  BOOST_REQUIRE(folders.count("autograd") && folders.count("docs") && !folders.count(".git"));
  const auto p = problems(map, folders, md_files(kSource / "docs"));
  BOOST_TEST(p.empty(), "README.md and the tree disagree:" << joined(p));
}

BOOST_AUTO_TEST_CASE(every_doc_is_under_400_lines) {
  const Names docs = md_files(kSource / "docs");
  BOOST_REQUIRE(!docs.empty());
  for (const std::string& doc : docs) {
    const size_t n = lines_of(read_text(kSource / "docs" / doc)).size();
    BOOST_CHECK_MESSAGE(n < 400, "docs/" << doc << ": " << n << " lines; a page stays under 400 (split it)");
  }
}
