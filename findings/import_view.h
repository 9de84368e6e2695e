// What `attograd import` did, as plain data: the family it read, the source, the run folder written, the
// model's size and the source's dtypes, and its one JSON line.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace findings {

struct ImportReport {
  std::string family;                        // gpt2, gpt_neo, gpt_neox or llama
  std::string source;                        // the Hugging Face folder, absolute
  std::string run;                           // the run folder written
  std::vector<std::string> source_files;     // the safetensors files read, relative to source
  std::vector<std::string> dtypes;           // the dtypes found in them ("F32", "BF16", ...)
  std::vector<std::string> tokenizer_files;  // copied into the run folder
  int64_t params = 0;
};

inline nlohmann::json import_to_json(const ImportReport& r) {
  return {{"family", r.family}, {"source", r.source},
          {"run", r.run},       {"source_files", r.source_files},
          {"dtypes", r.dtypes}, {"tokenizer_files", r.tokenizer_files},
          {"params", r.params}};
}

inline std::string import_table(const ImportReport& r) {
  std::string dtypes, tokenizer;
  for (const std::string& d : r.dtypes) dtypes += (dtypes.empty() ? "" : ", ") + d;
  for (const std::string& t : r.tokenizer_files) tokenizer += (tokenizer.empty() ? "" : ", ") + t;
  return "imported " + r.family + " (" + std::to_string(r.params) + " parameters, " + dtypes + ") from " +
         r.source + "\ninto " + r.run + (tokenizer.empty() ? "" : "\ntokenizer: " + tokenizer) + "\n";
}

}  // namespace findings
