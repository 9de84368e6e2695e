// The sweep-file loader: the input is the sweep file's text, in which every "@BASE@" is replaced by the
// path of a small valid base config written once into the scratch folder (the seed corpus names it so).
// A loaded sweep must hold no grid over train.threads, the grid's product of runs, with unique names, each
// run's config equal to loading the base with that run's --set values, and a manifest that serialises
// (out/sweep.json).
#include <set>

#include "fuzz/fuzz_common.h"
#include "train/sweep.h"

namespace {

const char kBase[] =
    R"({"task": {"kind": "copy", "vocab": 6, "length": 4},
        "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32},
        "train": {"steps": 10, "batch_size": 4, "threads": 1}})";

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "sweep invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = fuzz::scratch_dir();
  static const std::string base = [] {
    fuzz::write_file(dir + "/base.json", reinterpret_cast<const uint8_t*>(kBase), sizeof kBase - 1);
    return dir + "/base.json";
  }();
  std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t at = 0; (at = text.find("@BASE@", at)) != std::string::npos; at += base.size())
    text.replace(at, 6, base);
  const std::string path = dir + "/sweep.json";
  fuzz::write_file(path, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  train::Sweep sweep;
  try {
    sweep = train::load_sweep(path);
  } catch (const std::exception& e) {
    fuzz::check_one_line(e, fuzz::Rule::main_escapes);
    return 0;
  }
  check(!sweep.grid.contains("train.threads"),
        "a grid over train.threads (which the sweep sets) was accepted");
  size_t product = 1;
  for (const auto& item : sweep.grid.items()) product *= item.value().size();
  check(sweep.runs.size() == product, "the runs are not the grid's product");
  std::set<std::string> names;
  for (const train::SweepRun& run : sweep.runs) {
    check(!run.name.empty() && run.name.find('/') == std::string::npos, "a run name is empty or has a /");
    check(names.insert(run.name).second, "two runs share a name");
    train::Config again = train::load_config(sweep.base, run.overrides);
    again.output.dir = run.config.output.dir;
    check(again == run.config, "a run's config differs from base + its --set values");
  }
  (void)train::sweep_manifest(sweep).dump();  // throws, and so fails, on text that is not UTF-8
  return 0;
}
