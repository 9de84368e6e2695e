// attograd sae and attograd tms from the command line: an SAE trained on the committed induction_small
// run writes its folder (sae.safetensors with SAELens's tensors and the config in its metadata, eval.json,
// features.json, features.html with each shown feature's top example around its peak token) and prints the
// documented --json keys; the run's report.html gets a "Sparse autoencoders" row with eval.json's numbers
// and a link to features.html; the same command twice gives the same bytes; Ctrl-C checkpoints and --resume
// ends with the same bytes as an uninterrupted SAE; bad points, configs, arguments and a malformed
// eval.json beside it are one-line errors with exit 2; a linked RUN/sae or RUN/sae/POINT is refused before
// anything is written through it; a corrupt checkpoint (a value not finite, a step beyond the config's) is
// refused on --resume naming the file and the tensor or field; tms --json prints W (m x n), b and the loss.
// `transcoder --cross-layer` writes circuit-tracer's W_dec layout and, per layer, feature pages as the SAE's,
// linked from the report's "Transcoders" section; `graph` reads the folder.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/run_command.h"
#include "common/temp_dir.h"
#include "findings/svg_heatmap.h"
#include "train/safetensors.h"

namespace fs = std::filesystem;

namespace {

// A copy of the committed run, so the SAE's folder goes into a temporary one.
std::string copy_run(const testing::TempDir& tmp) {
  const fs::path run = tmp.dir / "run";
  fs::copy(fs::path(ATTOGRAD_SOURCE_DIR) / "tests/fixtures/induction_small", run,
           fs::copy_options::recursive);
  return run.string();
}

const char* kConfig =
    R"({"steps": 40, "batch_size": 64, "buffer_tokens": 256, "checkpoint_every": 20, "eval_sequences": 8, "d_sae": 24})";

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// The text of the first element `<TAG ...>TEXT</TAG>` in `html` from `from`, or "(none)".
std::string first_element_text(const std::string& html, size_t from, size_t to, const std::string& tag) {
  const size_t open = html.find("<" + tag, from);
  if (open == std::string::npos || open >= to) return "(none)";
  const size_t text = html.find('>', open) + 1, close = html.find("</" + tag + ">", text);
  return html.substr(text, close - text);
}

}  // namespace

BOOST_AUTO_TEST_CASE(trains_writes_its_folder_and_prints_the_json_keys) {
  testing::TempDir tmp;
  const std::string run = copy_run(tmp);
  const std::string config = (tmp.dir / "sae.json").string();
  std::ofstream(config) << kConfig;
  const std::string args = testing::shell_quote(run) + " --at blocks.0.mlp.post --config " +
                           testing::shell_quote(config) + " --json";
  const testing::CommandResult r = testing::run_attograd("sae " + args);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"point", "d_in", "d_sae", "mse", "explained_variance", "l0", "dead", "ce_loss_recovered", "kl"})
    BOOST_TEST(j.contains(key), key);
  BOOST_TEST(j["d_in"] == 32);
  BOOST_TEST(j["d_sae"] == 24);
  const std::string dir = run + "/sae/blocks.0.mlp.post";
  for (const char* file :
       {"sae.safetensors", "checkpoint.safetensors", "eval.json", "features.json", "features.html"})
    BOOST_TEST(fs::is_regular_file(dir + "/" + file), file);
  const train::SafetensorsFile sae = train::read_safetensors(dir + "/sae.safetensors");
  train::expect_tensors(sae, {{"W_enc", {32, 24}}, {"b_enc", {24}}, {"W_dec", {24, 32}}, {"b_dec", {32}}},
                        dir + "/sae.safetensors");
  BOOST_TEST(train::metadata_string(sae, "hook_name", "sae") == "blocks.0.mlp.post");
  BOOST_TEST(nlohmann::json::parse(train::metadata_string(sae, "config", "sae"))["steps"] == 40);
  // The run's report lists the SAE: eval.json's numbers in the table's formats, the density histogram (a
  // bar per bin), and the link to its page, relative to the run folder.
  const nlohmann::json ev = nlohmann::json::parse(testing::read_all(dir + "/eval.json"));
  const std::string report = testing::read_all(run + "/report.html");
  const size_t section = report.find("<section id=\"sae\"><h2>Sparse autoencoders</h2>");
  BOOST_TEST_REQUIRE(section != std::string::npos);
  BOOST_TEST(report.find("<a href=\"#sae\">") != std::string::npos);
  const size_t row = report.find("<tr><td>blocks.0.mlp.post</td>", section);
  BOOST_TEST_REQUIRE(row != std::string::npos);
  const std::string cells = report.substr(row, report.find("</tr>", row) - row);
  const auto cell = [](const nlohmann::json& v, const char* fmt) {
    return v.is_null() ? std::string("<td class=\"num muted\">&ndash;</td>")
                       : "<td class=\"num\">" + format(fmt, v.get<double>()) + "</td>";
  };
  const std::string expected = "<td class=\"num\">32</td><td class=\"num\">24</td>" +
                               cell(ev["mse"], "%.4g") + cell(ev["explained_variance"], "%.4f") +
                               cell(ev["l0"], "%.2f") + "<td class=\"num\">" +
                               std::to_string(ev["dead"].get<int64_t>()) + "</td>" +
                               cell(ev["ce_loss_recovered"], "%.4f") + cell(ev["kl"], "%.4g");
  BOOST_TEST(cells.find(expected) != std::string::npos, cells);
  BOOST_TEST(cells.find("<a href=\"sae/blocks.0.mlp.post/features.html\">") != std::string::npos, cells);
  const std::string svg = cells.substr(cells.find("<svg class=\"density\""));
  const auto& counts = ev["density_histogram"]["counts"];
  BOOST_TEST_REQUIRE(counts.size() == 7u);
  for (size_t i = 0; i < counts.size(); ++i)
    BOOST_TEST(
        svg.find("<title>" + findings::xml_escape(ev["density_histogram"]["bins"][i].get<std::string>()) +
                 ": " + std::to_string(counts[i].get<int64_t>()) + "</title>") != std::string::npos,
        i);
  // features.html: every feature that fired, each with its top example around the peak token (boxed).
  const nlohmann::json features = nlohmann::json::parse(testing::read_all(dir + "/features.json"));
  const std::string page = testing::read_all(dir + "/features.html");
  int shown = 0;
  for (const nlohmann::json& f : features) {
    if (f["examples"].empty()) continue;
    ++shown;
    const std::string anchor =
        "<div class=feat id=feature-" + std::to_string(f["index"].get<int64_t>()) + ">";
    const size_t at = page.find(anchor);
    BOOST_TEST_REQUIRE(at != std::string::npos, anchor);
    const size_t end = std::min(page.size(), page.find("<div class=feat ", at + 1));
    const nlohmann::json& top = f["examples"][0];
    const std::string peak = top["tokens"][top["position"].get<size_t>()];
    BOOST_TEST(first_element_text(page, at, end, "b") == findings::xml_escape(peak), anchor);
  }
  BOOST_TEST(shown > 0);
  // Same command, same bits.
  const std::string first = testing::read_all(dir + "/sae.safetensors");
  BOOST_TEST_REQUIRE(testing::run_attograd("sae " + args).exit_code == 0);
  BOOST_TEST((testing::read_all(dir + "/sae.safetensors") == first));
}

BOOST_AUTO_TEST_CASE(bad_input_is_one_line_and_exit_2) {
  testing::TempDir tmp;
  const std::string run = copy_run(tmp);
  const std::string bad = (tmp.dir / "bad.json").string();
  std::ofstream(bad) << R"({"activation": "gelu"})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sae " + run + " --at blocks.7.mlp.post", "point blocks.7.mlp.post: not a hook point of this model"},
      {"sae " + run + " --at blocks.0.attn.pattern",
       "point blocks.0.attn.pattern: expected a point of shape (B, T, D)"},
      {"sae " + run + " --at blocks.0.mlp.post --config " + bad,
       bad + ": /activation: expected \"relu\", \"topk\", \"batchtopk\" or \"jumprelu\", got \"gelu\""},
      {"sae " + run, "point: expected a hook point, e.g. blocks.0.mlp.post"},
      {"tms --n 3 --m 4", "m 4: expected fewer dimensions than n (3)"},
  };
  for (const auto& [args, expected] : cases) {
    const testing::CommandResult r = testing::run_attograd(args);
    BOOST_TEST(r.exit_code == 2, args);
    BOOST_TEST(r.err.find(expected) != std::string::npos, args << ": " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, args << ": " << r.err);
  }
  BOOST_TEST(!fs::exists(run + "/sae/blocks.0.attn.pattern"));
  // Another SAE's malformed eval.json: the report cannot list it, and says which file and field.
  fs::create_directories(run + "/sae/blocks.0.resid_post");
  std::ofstream(run + "/sae/blocks.0.resid_post/eval.json")
      << R"({"point": "blocks.0.resid_post", "d_in": -1})";
  const std::string config = (tmp.dir / "sae.json").string();
  std::ofstream(config) << kConfig;
  const testing::CommandResult r =
      testing::run_attograd("sae " + run + " --at blocks.0.mlp.post --config " + config + " --json");
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(
      r.err.find(run +
                 "/sae/blocks.0.resid_post/eval.json: /d_in: expected a non-negative integer, got -1") !=
          std::string::npos,
      r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
}

BOOST_AUTO_TEST_CASE(tms_json_prints_w_b_and_the_loss) {
  const testing::CommandResult r = testing::run_attograd("tms --n 5 --m 2 --sparsity 0.9 --steps 200 --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["W"].size() == 2u);
  BOOST_TEST(j["W"][0].size() == 5u);
  BOOST_TEST(j["b"].size() == 5u);
  BOOST_TEST(j["loss"].get<double>() > 0);
}

BOOST_AUTO_TEST_CASE(ctrl_c_checkpoints_and_resume_is_bit_exact) {
  testing::TempDir tmp;
  const std::string run = copy_run(tmp);
  const std::string config = (tmp.dir / "long.json").string();
  std::ofstream(config)
      << R"({"steps": 4000, "batch_size": 64, "buffer_tokens": 256, "checkpoint_every": 25, "eval_sequences": 8, "d_sae": 48})";
  const std::string base = testing::shell_quote(run) + " --at blocks.0.mlp.post --json --out ";
  const std::string full = (tmp.dir / "full").string(), cut = (tmp.dir / "cut").string();
  BOOST_REQUIRE(testing::run_attograd("sae " + base + testing::shell_quote(full) + " --config " +
                                      testing::shell_quote(config))
                    .exit_code == 0);

  // The same SAE again; Ctrl-C once its first checkpoint is on disk.
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = std::string("exec '") + ATTOGRAD_BINARY + "' sae " + base +
                            testing::shell_quote(cut) + " --config " + testing::shell_quote(config) +
                            " >/dev/null 2>" + testing::shell_quote((tmp.dir / "cut.err").string());
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && !fs::exists(cut + "/checkpoint.safetensors"))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_TEST_REQUIRE(WEXITSTATUS(status) == 130, "the SAE finished before Ctrl-C arrived, or crashed");
  const std::string err = testing::read_all((tmp.dir / "cut.err").string());
  BOOST_TEST(err.find("checkpoint saved; continue with: attograd sae ") != std::string::npos, err);
  BOOST_TEST(!fs::exists(cut + "/sae.safetensors"));
  const train::SafetensorsFile saved = train::read_safetensors(cut + "/checkpoint.safetensors");
  const uint64_t stopped_at = train::metadata_u64(saved, "step", "checkpoint");
  BOOST_TEST(stopped_at > 0u);
  BOOST_TEST(stopped_at < 4000u);

  const testing::CommandResult resumed =
      testing::run_attograd("sae " + base + testing::shell_quote(cut) + " --resume");
  BOOST_TEST_REQUIRE(resumed.exit_code == 0, resumed.err);
  BOOST_TEST((testing::read_all(cut + "/sae.safetensors") == testing::read_all(full + "/sae.safetensors")),
             "stopped at step " << stopped_at << " and resumed, the SAE differs from the uninterrupted one");
  BOOST_TEST((testing::read_all(cut + "/eval.json") == testing::read_all(full + "/eval.json")));
}

BOOST_AUTO_TEST_CASE(a_linked_sae_folder_is_refused_before_anything_is_written) {
  testing::TempDir tmp;
  const std::string config = (tmp.dir / "sae.json").string();
  std::ofstream(config) << kConfig;
  const fs::path mine = tmp.dir / "mine";
  fs::create_directories(mine);
  std::ofstream(mine / "eval.json") << "mine\n";
  // RUN/sae/POINT a link to a folder outside the run, and RUN/sae itself a link.
  for (const std::string level : {"sae/blocks.0.mlp.post", "sae"}) {
    const fs::path run = tmp.dir / ("run-" + std::to_string(level.size()));
    fs::copy(fs::path(ATTOGRAD_SOURCE_DIR) / "tests/fixtures/induction_small", run,
             fs::copy_options::recursive);
    fs::create_directories((run / level).parent_path());
    fs::create_directory_symlink(level == "sae" ? tmp.dir : mine, run / level);
    const testing::CommandResult r =
        testing::run_attograd("sae " + testing::shell_quote(run.string()) +
                              " --at blocks.0.mlp.post --config " + testing::shell_quote(config) + " --json");
    BOOST_TEST(r.exit_code == 2, level << ": " << r.err);
    BOOST_TEST(r.err.find("attograd sae: " + (run / level).string() + ": is a symbolic link") == 0,
               level << ": " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, level << ": " << r.err);
    BOOST_TEST(r.out.empty(), level);
  }
  BOOST_TEST(testing::read_all((mine / "eval.json").string()) == "mine\n");
  BOOST_TEST(std::distance(fs::directory_iterator(mine), fs::directory_iterator()) == 1);
  BOOST_TEST(!fs::exists(tmp.dir / "blocks.0.mlp.post"));
}

BOOST_AUTO_TEST_CASE(a_corrupt_checkpoint_is_refused_on_resume) {
  testing::TempDir tmp;
  const std::string run = copy_run(tmp);
  const std::string config = (tmp.dir / "sae.json").string();
  std::ofstream(config) << kConfig;
  const std::string out = (tmp.dir / "sae").string(), checkpoint = out + "/checkpoint.safetensors";
  const std::string base = "sae " + testing::shell_quote(run) + " --at blocks.0.mlp.post --json --out " +
                           testing::shell_quote(out);
  BOOST_TEST_REQUIRE(testing::run_attograd(base + " --config " + testing::shell_quote(config)).exit_code ==
                     0);
  const train::SafetensorsFile good = train::read_safetensors(checkpoint);
  // Each case: a change to the checkpoint, and what the error names.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const auto set = [](const char* name, size_t i, float v) {
    return [=](train::SafetensorsFile& f) {
      for (train::NamedArray& t : f.tensors)
        if (t.name == name) t.data[i] = v;
    };
  };
  const std::vector<std::pair<std::function<void(train::SafetensorsFile&)>, std::string>> cases = {
      {set("W_enc", 5, nan), ": W_enc: a value is not finite"},
      {set("W_dec", 0, inf), ": W_dec: a value is not finite"},
      {set("fired", 2, nan), ": fired: a value is not finite"},
      {set("fired", 2, -1.f), ": fired: a value is negative"},
      {set("adam_v.b_enc", 1, -inf), ": adam_v.b_enc: a value is not finite"},
      {[](train::SafetensorsFile& f) { f.metadata["step"] = train::u64_to_metadata(~uint64_t(0)); },
       ": metadata step: expected at most the config's steps (40), got 18446744073709551615"},
  };
  for (const auto& [corrupt, expected] : cases) {
    train::SafetensorsFile bad = good;
    corrupt(bad);
    train::write_safetensors(checkpoint, bad.tensors, bad.metadata);
    const testing::CommandResult r = testing::run_attograd(base + " --resume");
    BOOST_TEST(r.exit_code == 2, expected << ": " << r.err);
    BOOST_TEST(r.err == "attograd sae: " + checkpoint + expected + "\n", r.err);
  }
}

BOOST_AUTO_TEST_CASE(transcoders_write_feature_pages_linked_from_the_report) {
  // `transcoder --cross-layer` on the committed induction_small run (2 layers with MLPs): layer 0's file
  // holds W_dec (d_sae, 2, d_model) as circuit-tracer's CLT, every layer gets features.json and
  // features.html as an SAE's, and the report's "Transcoders" section links them; `graph` reads the folder.
  testing::TempDir tmp;
  const std::string run = copy_run(tmp);
  const std::string config = (tmp.dir / "tc.json").string();
  std::ofstream(config) << kConfig;
  const testing::CommandResult r =
      testing::run_attograd("transcoder " + testing::shell_quote(run) + " --cross-layer --config " +
                            testing::shell_quote(config) + " --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["cross_layer"] == true);
  BOOST_TEST(j["layers"].size() == 2u);
  const std::string dir = run + "/transcoders";
  BOOST_TEST(fs::is_regular_file(dir + "/checkpoint.safetensors"));
  const train::SafetensorsFile l0 = train::read_safetensors(dir + "/0/transcoder.safetensors");
  train::expect_tensors(l0, {{"W_enc", {16, 24}}, {"b_enc", {24}}, {"W_dec", {24, 2, 16}}, {"b_dec", {16}}},
                        "layer 0");
  BOOST_TEST(train::metadata_string(l0, "architecture", "layer 0") == "cross_layer_transcoder");
  const std::string report = testing::read_all(run + "/report.html");
  const size_t section = report.find("<section id=\"transcoders\"><h2>Transcoders</h2>");
  BOOST_TEST_REQUIRE(section != std::string::npos);
  for (const char* layer : {"0", "1"}) {
    const std::string page = dir + "/" + layer + "/features.html";
    BOOST_TEST_REQUIRE(fs::is_regular_file(page), page);
    BOOST_TEST(report.find("<a href=\"transcoders/" + std::string(layer) + "/features.html\">", section) !=
               std::string::npos);
    const nlohmann::json features =
        nlohmann::json::parse(testing::read_all(dir + "/" + layer + "/features.json"));
    BOOST_TEST(features.size() == 24u);
    int with_examples = 0;
    for (const nlohmann::json& f : features) {
      with_examples += !f["examples"].empty();
      BOOST_TEST(f["promoted"].size() == 5u);  // the decoder direction's logit effects
    }
    BOOST_TEST(with_examples > 0);
    BOOST_TEST(testing::read_all(page).find("cross-layer transcoder at layer " + std::string(layer)) !=
               std::string::npos);
  }
  const testing::CommandResult g =
      testing::run_attograd("graph " + testing::shell_quote(run) + " --tokens '1 2 3 1 2' --json");
  BOOST_TEST(g.exit_code == 0, g.err);
}
