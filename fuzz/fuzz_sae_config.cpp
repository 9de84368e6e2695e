// The SAE config reader (`attograd sae --config FILE`): the input is the file, and load_sae_config reads it
// through the bounded JSON reader and the SAE config's table. A config accepted must be one the table's
// ranges allow and must survive its own round trip (to_json, then read again, gives the same config);
// anything else must be a one-line error. A crash, a hang or a broken message is a finding.
#include "dictionary/sae.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_dir() + "/sae.json";
  fuzz::write_file(path, data, size);
  dictionary::SaeConfig c;
  try {
    c = dictionary::load_sae_config(path);
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
    return 0;
  }
  if (c.steps < 1 || c.batch_size < 1 || !(c.lr > 0) || c.k < 1 || c.expansion < 1 || c.d_sae < 0) {
    std::fprintf(stderr, "an SAE config outside its table's ranges was accepted\n");
    std::abort();
  }
  const nlohmann::json again = dictionary::sae_config_to_json(c);
  if (dictionary::sae_config_to_json(dictionary::sae_config_from_json(again, "again")) != again) {
    std::fprintf(stderr, "an accepted SAE config does not survive its round trip\n");
    std::abort();
  }
  return 0;
}
