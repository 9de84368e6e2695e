// The config loader: the input is a config file, then NUL-separated --set overrides, e.g.
// `{"task":{"kind":"copy"}}\0train.steps=10\0model.d_model=32`. A loaded config must survive the round
// trip through the run folder's config.json (dump, parse, validate) unchanged.
#include <cstring>

#include "fuzz/fuzz_common.h"
#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_dir() + "/config.json";
  const char* begin = reinterpret_cast<const char*>(data);
  const char* end = begin + size;
  const char* nul = static_cast<const char*>(std::memchr(begin, '\0', size));
  const char* file_end = nul ? nul : end;
  fuzz::write_file(path, data, static_cast<size_t>(file_end - begin));
  std::vector<std::string> overrides;
  for (const char* p = file_end; p < end;) {
    ++p;  // the NUL before each override
    const char* next = static_cast<const char*>(std::memchr(p, '\0', static_cast<size_t>(end - p)));
    if (!next) next = end;
    overrides.emplace_back(p, next);
    p = next;
  }
  try {
    train::check_resume_overrides(overrides);
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
  }
  train::Config config;
  try {
    config = train::load_config(path, overrides);
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
    return 0;
  }
  const std::string text = train::to_json(config).dump(2);  // throws on a string that is not UTF-8
  const train::Config again = train::from_json(nlohmann::json::parse(text), "config.json");
  if (again != config) {
    std::fprintf(stderr, "config changed in its round trip through config.json:\n%s\n", text.c_str());
    std::abort();
  }
  return 0;
}
