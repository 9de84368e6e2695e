// The contract against the program: docs/cli.md (with its continuation docs/cli-tracing.md) has a section "##
// `attograd SUB`" per subcommand, with its usage (indented lines "    attograd SUB ...") and a table whose
// first column names each argument and option. Every subcommand that `attograd --help` (or a subcommand's
// --help) lists must have its section, every argument and long option that `attograd SUB --help` lists must
// be in that section's table, and the section's table and usage may name no subcommand or option the program
// lacks. A failure names what is missing where.
// And the front ends against each other (issue 57): every study tool with a subcommand takes the same fields
// on the command line (its --help), in Python (its row's `fields`, which python/tools.cpp binds as keyword
// arguments) and in its docs section, with the same defaults, but for the front-end-only options listed
// below with their reasons.
#include <boost/test/unit_test.hpp>
#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_command.h"
#include "study/tools.h"

using testing::run_attograd;

namespace {

using Names = std::set<std::string>;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// The long options ("--name") among the comma-separated names of `spec`, e.g. "-j,--jobs" or "-j, --jobs".
Names long_options(const std::string& spec) {
  Names out;
  for (size_t at = spec.find("--"); at != std::string::npos; at = spec.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < spec.size() && (std::isalnum(static_cast<unsigned char>(spec[end])) || spec[end] == '-'))
      ++end;
    if (end > at + 2) out.insert(spec.substr(at, end - at));
  }
  return out;
}

std::string first_word(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find(' ', b) - b);
}

// What one --help output lists. CLI11 prints a heading line ("Positionals:", "Options:", "Subcommands:")
// and under it one line per entry, indented by two spaces, its names first ("  -j,--jobs INT  runs at a
// time"); a description that does not fit goes on a line of its own, indented further.
struct Help {
  Names subcommands, positionals, options;
};

Help parse_help(const std::string& text) {
  Help h;
  std::string heading;
  for (const std::string& line : lines_of(text)) {
    if (line.empty()) continue;
    if (line[0] != ' ') {
      heading = line;
      continue;
    }
    if (line.size() < 3 || line[1] != ' ' || line[2] == ' ') continue;  // not an entry's first line
    const std::string name = first_word(line);
    if (heading == "Subcommands:") {
      h.subcommands.insert(name);
    } else if (heading == "Positionals:") {
      h.positionals.insert(name);
    } else if (heading == "Options:" && name[0] == '-') {
      for (const std::string& o : long_options(name))
        if (o != "--help") h.options.insert(o);
    }
  }
  return h;
}

// One subcommand's section of the contract: the names in the first column of its table, and the long
// options its usage lines name.
struct Section {
  Names positionals, options, usage_options;
  std::map<std::string, std::string> rows;  // each name in a table's first column -> its whole row
};

// The sections of docs/cli.md, by subcommand ("train", "sweep collect"). A section starts at a heading
// "## `attograd SUB`" and ends at the next "## " heading (a "### " heading inside it does not end it). Its
// usage lines are indented code ("    attograd SUB [--opt X]"); its table rows start with "| `", and their
// first cell holds an argument ("`RUN_DIR`") or options with their values ("`-j, --jobs N`").
std::map<std::string, Section> parse_contract(const std::string& doc) {
  std::map<std::string, Section> sections;
  Section* current = nullptr;
  for (const std::string& line : lines_of(doc)) {
    if (line.rfind("## ", 0) == 0) {
      const std::string prefix = "## `attograd ";
      current = nullptr;
      if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size() && line.back() == '`')
        current = &sections[line.substr(prefix.size(), line.size() - prefix.size() - 1)];
      continue;
    }
    if (line.rfind("# ", 0) == 0) current = nullptr;
    if (!current) continue;
    if (line.rfind("    attograd ", 0) == 0) {
      for (const std::string& o : long_options(line)) current->usage_options.insert(o);
      continue;
    }
    if (line.rfind("| `", 0) != 0) continue;
    const size_t cell_end = line.find(" |", 2);
    std::string cell = line.substr(2, cell_end == std::string::npos ? std::string::npos : cell_end - 2);
    std::string names;  // the text inside the cell's backquotes
    for (size_t open = cell.find('`'); open != std::string::npos; open = cell.find('`', open)) {
      const size_t close = cell.find('`', open + 1);
      if (close == std::string::npos) break;
      names += cell.substr(open + 1, close - open - 1) + " ";
      open = close + 1;
    }
    if (names.empty()) continue;
    if (names[0] == '-') {
      for (const std::string& o : long_options(names)) {
        current->options.insert(o);
        current->rows[o] = line;
      }
    } else {
      current->positionals.insert(first_word(names));
      current->rows[first_word(names)] = line;
    }
  }
  return sections;
}

// Each argument and long option of one --help output with its whole entry (names and description, the
// lines of an entry joined and its runs of spaces made one).
std::map<std::string, std::string> help_entries(const std::string& text) {
  std::map<std::string, std::string> entries;
  std::string heading;
  std::vector<std::string> current;  // the names the entry being read goes to
  for (const std::string& line : lines_of(text)) {
    if (line.empty()) continue;
    if (line[0] != ' ') {
      heading = line;
      current.clear();
      continue;
    }
    if (heading != "Options:" && heading != "Positionals:") continue;
    if (line.size() >= 3 && line[1] == ' ' && line[2] != ' ') {
      const std::string name = first_word(line);
      current.clear();
      if (heading == "Positionals:") {
        current.push_back(name);
      } else {
        for (const std::string& o : long_options(name))
          if (o != "--help") current.push_back(o);
      }
    }
    for (const std::string& name : current) entries[name] += " " + line;
  }
  for (auto& [name, entry] : entries) {
    std::string squeezed;
    for (char c : entry)
      if (c != ' ' || (!squeezed.empty() && squeezed.back() != ' ')) squeezed += c;
    entry = squeezed;
  }
  return entries;
}

std::string join(const Names& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

// The contract is docs/cli.md and its continuation, read as one document.
const std::vector<std::string> kContractFiles = {"docs/cli.md", "docs/cli-tracing.md"};
const std::string kContract = "docs/cli.md (or docs/cli-tracing.md)";

// Checks `attograd <path> --help` against the contract's section for `path`, then each of its subcommands.
void check_subcommand(const std::map<std::string, Section>& contract, const std::string& path, Names& seen) {
  const testing::CommandResult r = run_attograd(path + " --help");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0,
                        "attograd " + path + " --help: exit " + std::to_string(r.exit_code) + ": " + r.err);
  const Help help = parse_help(r.out);
  BOOST_REQUIRE_MESSAGE(!help.positionals.empty() || !help.options.empty(),
                        "attograd " + path + " --help: found no argument and no option in:\n" + r.out);
  seen.insert(path);
  const auto it = contract.find(path);
  BOOST_CHECK_MESSAGE(it != contract.end(),
                      kContract + ": `attograd " + path + "` has no section \"## `attograd " + path + "`\"");
  if (it != contract.end()) {
    const Section& doc = it->second;
    for (const std::string& p : help.positionals)
      BOOST_CHECK_MESSAGE(doc.positionals.count(p),
                          kContract + ": `attograd " + path + "` takes " + p +
                              ", which its table does not list (it lists: " + join(doc.positionals) + ")");
    for (const std::string& o : help.options)
      BOOST_CHECK_MESSAGE(doc.options.count(o), kContract + ": `attograd " + path + "` has option " + o +
                                                    ", which its table does not list");
    for (const std::string& p : doc.positionals)
      BOOST_CHECK_MESSAGE(help.positionals.count(p), kContract + ": the table of `attograd " + path +
                                                         "` lists " + p + ", which its --help does not (" +
                                                         join(help.positionals) + ")");
    for (const std::string& o : doc.options)
      BOOST_CHECK_MESSAGE(help.options.count(o), kContract + ": the table of `attograd " + path + "` lists " +
                                                     o + ", which its --help does not (" +
                                                     join(help.options) + ")");
    for (const std::string& o : doc.usage_options)
      BOOST_CHECK_MESSAGE(help.options.count(o), kContract + ": the usage of `attograd " + path + "` names " +
                                                     o + ", which its --help does not (" +
                                                     join(help.options) + ")");
  }
  for (const std::string& sub : help.subcommands) check_subcommand(contract, path + " " + sub, seen);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_help_output_parses_as_the_contract_test_expects) {
  // The parser above against CLI11's layout, so a change of layout fails here rather than passing vacuously.
  const Help h = parse_help(
      "a program\nUsage: attograd sweep [OPTIONS] [SWEEP] [SUBCOMMAND]\n\nPositionals:\n  SWEEP TEXT    the "
      "file\n\n"
      "Options:\n  -h,--help     Print this help message and exit\n  -j,--jobs INT:POSITIVE  runs\n"
      "  --tokens TEXT Excludes: --ids\n                              input, e.g. \"3 1 "
      "4\"\n\nSubcommands:\n  collect       build the summary\n");
  BOOST_TEST(h.positionals == Names({"SWEEP"}));
  BOOST_TEST(h.options == Names({"--jobs", "--tokens"}));
  BOOST_TEST(h.subcommands == Names({"collect"}));
}

BOOST_AUTO_TEST_CASE(the_contract_parses_a_section_per_subcommand) {
  const auto sections = parse_contract(
      "# attograd: the command line\n\n## `attograd sweep`\n\n    attograd sweep SWEEP [-j N] [--slurm F]\n\n"
      "| argument | meaning |\n|---|---|\n"
      "| `SWEEP` | the file, `x.json` |\n| `-j, --jobs N` | runs at a time, see `--print-commands` |\n\n"
      "### Its output\n\n| `--dry` | z |\n\n"
      "## `attograd sweep collect`\n\n| `DIR` | the folder |\n\n## Not a subcommand\n\n| `--x` | y |\n"
      "## Config\n\n### `attograd train`\n");
  BOOST_TEST(sections.size() == 2u);
  BOOST_TEST(sections.at("sweep").positionals == Names({"SWEEP"}));
  BOOST_TEST(sections.at("sweep").options == Names({"--jobs", "--dry"}));
  BOOST_TEST(sections.at("sweep").usage_options == Names({"--slurm"}));
  BOOST_TEST(sections.at("sweep collect").positionals == Names({"DIR"}));
  BOOST_TEST(sections.at("sweep collect").options.empty());
}

BOOST_AUTO_TEST_CASE(every_subcommand_and_option_of_the_program_is_in_the_contract_and_back) {
  std::string doc;
  for (const std::string& file : kContractFiles) {
    const std::string text = testing::read_all(std::string(ATTOGRAD_SOURCE_DIR) + "/" + file);
    BOOST_REQUIRE_MESSAGE(!text.empty(), file + ": cannot read");
    doc += text + "\n";
  }
  const std::map<std::string, Section> contract = parse_contract(doc);

  const testing::CommandResult top = run_attograd("--help");
  BOOST_REQUIRE_EQUAL(top.exit_code, 0);
  const Help help = parse_help(top.out);
  BOOST_REQUIRE_MESSAGE(!help.subcommands.empty(), "attograd --help: found no subcommand in:\n" + top.out);
  Names seen;
  for (const std::string& sub : help.subcommands) check_subcommand(contract, sub, seen);

  for (const auto& [path, section] : contract)
    BOOST_CHECK_MESSAGE(seen.count(path), kContract + ": has a section for `attograd " + path +
                                              "`, which the program's --help does not list");
}

namespace {

// The program's words for a tool: its name, "_" between a command and its subcommand.
std::string command_of(const std::string& tool) {
  std::string path = tool;
  for (char& c : path)
    if (c == '_') c = ' ';
  return path;
}

// A field's command-line name as the tables build it (cli/table_options.h): "--" + key, "_" as "-".
std::string option_of(const std::string& key) {
  std::string name = "--" + key;
  for (char& c : name)
    if (c == '_') c = '-';
  return name;
}

// Fields the command line spells otherwise (cli/cmd_*.cpp's Spellings, kept from before the tables drove
// the options), and the inputs (not table rows) the command line takes as --tokens (with --prompt and
// --ids, the InputOptions). "TOOL.field" -> its name in --help.
const std::map<std::string, std::string> kSpelled = {
    {"bench.config", "CONFIG"},     {"bench.sets", "--set"},
    {"gradcheck.config", "CONFIG"}, {"import.src", "SRC"},
    {"sae.point", "--at"},          {"sweep.file", "SWEEP"},
    {"sweep_collect.out", "DIR"},   {"circuits.composition", "--no-composition"},
    {"forward.input", "--tokens"},  {"attend.input", "--tokens"},
    {"detect.input", "--tokens"},   {"lens.input", "--tokens"},
    {"graph.input", "--tokens"},    {"scores.ids", "--tokens"},
    {"ablate.ids", "--tokens"},     {"generate.prepend_bos", "--no-bos"},
    {"entropy.ids", "--tokens"},
};

// Python's fields the command line has no option for, and why.
const std::map<std::string, std::string> kPythonOnly = {
    {"sweep.program", "the command line's children run the program itself"},
    {"circuits.save", "the command always writes its files, unless --processed"},
    {"fourier.save", "the command always writes its files"},
};

// The command line's options that are no field, and why. "--json" and RUN_DIR are every command's.
const std::map<std::string, std::string> kCommandLineOnly = {
    {"--json", "how the command prints; Python returns the object"},
    {"RUN_DIR", "Python's tools are methods of the open Run"},
    {"--prompt", "the input as text (InputOptions), a form of the input field"},
    {"--ids", "the input as raw ids (InputOptions), a form of the input field"},
    {"patch.--clean-prompt", "the clean input as text, a form of clean"},
    {"patch.--corrupt-prompt", "the corrupt input as text, a form of corrupt"},
    {"sae.--progress", "a progress line on stderr; Python has none"},
    {"sae_synthetic.--progress", "a progress line on stderr; Python has none"},
    {"tms.--out",
     "the sweep's figure: the command sweeps the sparsities unless --json, Python's tms is one "
     "model (--json)"},
};

// Defaults the command line shows otherwise, and why.
const std::map<std::string, std::string> kOwnDefault = {
    {"ablate.mode", "without --mode the command runs zero and mean ablation both"},
    {"circuits.composition", "--no-composition: the flag says the other way round"},
    {"generate.prepend_bos", "--no-bos: the flag says the other way round"},
};

// Whether a docs row gives `value`: as written, or a number written another way (1e-6 for 1e-06).
bool mentions(const std::string& row, const std::string& value) {
  if (row.find(value) != std::string::npos) return true;
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0') return false;
  std::string word;
  for (size_t i = 0; i <= row.size(); ++i) {
    const char c = i < row.size() ? row[i] : ' ';
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '-' ||
        c == '+') {
      word += c;
      continue;
    }
    if (!word.empty() && std::strtod(word.c_str(), &end) == number && *end == '\0') return true;
    word.clear();
  }
  return false;
}

bool listed(const std::map<std::string, std::string>& list, const std::string& tool,
            const std::string& name) {
  return list.count(name) || list.count(tool + "." + name);
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_tool_takes_the_same_fields_with_the_same_defaults_in_every_front_end) {
  std::string doc;
  for (const std::string& file : kContractFiles)
    doc += testing::read_all(std::string(ATTOGRAD_SOURCE_DIR) + "/" + file) + "\n";
  const std::map<std::string, Section> contract = parse_contract(doc);

  const Help top = parse_help(run_attograd("--help").out);
  size_t checked = 0;
  bool saw_qk = false;
  for (const study::Tool& tool : study::tools()) {
    const std::string path = command_of(tool.name);
    if (!top.subcommands.count(path.substr(0, path.find(' ')))) continue;
    const std::string where = "`attograd " + path + "` (" + tool.name + ")";
    const testing::CommandResult r = run_attograd(path + " --help");
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, where + " --help: exit " + std::to_string(r.exit_code));
    const std::map<std::string, std::string> entries = help_entries(r.out);
    const auto section = contract.find(path);
    BOOST_REQUIRE_MESSAGE(section != contract.end(), kContract + ": no section for " + where);
    ++checked;

    Names named;  // the --help names the fields account for
    for (const std::string& field : tool.fields) {
      const std::string key = tool.name + "." + field;
      if (kPythonOnly.count(key)) {
        BOOST_CHECK_MESSAGE(!entries.count(option_of(field)),
                            where + ": " + option_of(field) +
                                " is listed as Python's only, but the command "
                                "takes it: drop it from kPythonOnly");
        continue;
      }
      const std::string name = kSpelled.count(key) ? kSpelled.at(key) : option_of(field);
      named.insert(name);
      saw_qk = saw_qk || key == "graph.qk";
      BOOST_CHECK_MESSAGE(entries.count(name),
                          where + ": Python's " + field + "= has no option " + name + " on the command line");
      BOOST_CHECK_MESSAGE(section->second.rows.count(name),
                          kContract + ": the table of " + where + " has no row for " + name);
    }
    for (const auto& [name, entry] : entries)
      BOOST_CHECK_MESSAGE(named.count(name) || listed(kCommandLineOnly, tool.name, name),
                          where + ": the command line's " + name +
                              " is no field of the tool (Python lacks it): give the request a table row, or "
                              "list it in kCommandLineOnly with the reason");

    // Defaults: the command line shows the request's (through its table's rows), and so do the docs.
    for (const io::FieldInfo& row : tool.rows) {
      const std::string key = tool.name + "." + row.path;
      if (kPythonOnly.count(key) || kOwnDefault.count(key)) continue;
      const std::string name = kSpelled.count(key) ? kSpelled.at(key) : option_of(row.path);
      const auto entry = entries.find(name);
      if (entry == entries.end()) continue;  // said above
      const std::string shown = study::shown_default(row);
      const std::string said = "(default: " + shown + ")";
      if (!shown.empty()) {
        BOOST_CHECK_MESSAGE(
            entry->second.find(said) != std::string::npos,
            where + ": " + name + "'s help does not say " + said + ", Python's default: " + entry->second);
        const auto doc_row = section->second.rows.find(name);
        if (row.default_means.empty() && doc_row != section->second.rows.end())
          BOOST_CHECK_MESSAGE(mentions(doc_row->second, shown), kContract + ": the row of " + name + " in " +
                                                                    where + " does not give its default " +
                                                                    shown + ": " + doc_row->second);
      } else {
        BOOST_CHECK_MESSAGE(
            entry->second.find("(default: ") == std::string::npos,
            where + ": " + name + "'s help shows a default where Python's has none: " + entry->second);
      }
    }
  }
  // Vacuous if the tools or their subcommands were not found.
  BOOST_TEST(checked > 10u);
  BOOST_TEST(saw_qk, "graph's qk is no field of the graph tool");
}
