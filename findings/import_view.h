// What `attograd import` did, as plain data: the family it read, the source, the run folder written, the
// model's size and the source's dtypes, and its one JSON line.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
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
  // `--process`: each TransformerLens step asked for and what it did to this model (analysis/processing.h);
  // empty: the weights are the source's.
  std::vector<std::pair<std::string, std::string>> processing;
};

inline nlohmann::json import_to_json(const ImportReport& r) {
  nlohmann::json processing = nlohmann::json::object();
  for (const auto& [step, what] : r.processing) processing[step] = what;
  return {{"family", r.family},
          {"source", r.source},
          {"run", r.run},
          {"source_files", r.source_files},
          {"dtypes", r.dtypes},
          {"tokenizer_files", r.tokenizer_files},
          {"params", r.params},
          {"processed", !r.processing.empty()},
          {"processing", processing}};
}

inline std::string import_table(const ImportReport& r) {
  std::string dtypes, tokenizer;
  for (const std::string& d : r.dtypes) dtypes += (dtypes.empty() ? "" : ", ") + d;
  for (const std::string& t : r.tokenizer_files) tokenizer += (tokenizer.empty() ? "" : ", ") + t;
  std::string processing;
  for (const auto& [step, what] : r.processing) processing += "\n  " + step + ": " + what;
  return "imported " + r.family + " (" + std::to_string(r.params) + " parameters, " + dtypes + ") from " +
         r.source + "\ninto " + r.run + (tokenizer.empty() ? "" : "\ntokenizer: " + tokenizer) +
         (processing.empty() ? "" : "\nprocessed (TransformerLens's weight processing):" + processing) + "\n";
}

}  // namespace findings
