#include "study/tools.h"

#include <cstdio>
#include <type_traits>
#include <utility>
#include <variant>

#include "analysis/ablation.h"
#include "analysis/attention.h"
#include "analysis/circuits.h"
#include "analysis/detect.h"
#include "analysis/entropy.h"
#include "analysis/evaluation.h"
#include "analysis/fourier.h"
#include "analysis/generate.h"
#include "analysis/gradcheck.h"
#include "analysis/lens.h"
#include "analysis/lesson.h"
#include "analysis/patching.h"
#include "analysis/scores.h"
#include "attribution/graph.h"
#include "dictionary/sae_tool.h"
#include "dictionary/tms.h"
#include "dictionary/transcoder.h"
#include "imports/import_model.h"
#include "io/field_table.h"
#include "io/printable.h"
#include "runner/bench.h"
#include "runner/sweep.h"
#include "study/fields.h"

namespace study {

namespace {

using nlohmann::json;

// A request's inputs beyond its table: sequences (a JSON string is token names, an array of integers raw
// ids), lists of sequences (a JSON array of them: the user's prompts), tokens (a string is a name, an integer
// an id) and optional integers (a layer, a head: absent or null for none), in the order a caller gives them
// (a list of sequences after the table's fields, so it never takes a positional argument's place).
// Each with the command line's help for it (a generic command's --tokens, --NAME), "" for its name.
template <typename Request>
struct Input {
  using Member = std::variant<analysis::Sequence Request::*, analysis::Token Request::*,
                              std::optional<int> Request::*, std::vector<analysis::Sequence> Request::*>;
  Input(const char* name_, Member member_, const char* meaning_ = "")
      : name(name_), member(member_), meaning(meaning_) {}
  const char* name;
  Member member;
  const char* meaning;
};
template <typename Request>
using Inputs = std::vector<Input<Request>>;

// A sequence: a string of token names, an array of ids or {"prompt": TEXT}, not empty.
void read_sequence(const io::Section& root, const char* key, const json& value, analysis::Sequence& s) {
  if (value.is_string()) {
    root.read(key, s.tokens);
  } else if (value.is_array()) {
    root.read(key, s.ids);
  } else if (value.is_object() && value.size() == 1 && value.contains("prompt")) {
    root.section(key).read("prompt", s.text);
  } else {
    io::field_fail(root.pointer(key),
                   "expected token names (a string), ids (an array of integers) or {\"prompt\": TEXT}, got " +
                       io::describe(value));
  }
  if (s.empty()) io::field_fail(root.pointer(key), "expected token names or ids, got none");
}

// A list of sequences: a non-empty array, each a string of token names or an array of integer ids.
void read_sequences(const io::Section& root, const char* key, const json& value,
                    std::vector<analysis::Sequence>& out) {
  const std::string pointer = root.pointer(key);
  if (!value.is_array() || value.empty())
    io::field_fail(pointer, "expected a list of sequences (token-name strings or id arrays), got " +
                                io::describe(value));
  for (size_t i = 0; i < value.size(); ++i) {
    const json& v = value[i];
    const std::string where = pointer + "/" + std::to_string(i);
    analysis::Sequence s;
    if (v.is_string()) {
      s.tokens = v.get<std::string>();
    } else if (v.is_array()) {
      for (const json& id : v) {
        if (!id.is_number_integer() ||
            (id.is_number_unsigned() && id.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
          io::field_fail(where, "expected integer token ids, got " + io::describe(id));
        s.ids.push_back(id.get<int64_t>());
      }
    } else {
      io::field_fail(where,
                     "expected token names (a string) or ids (an array of integers), got " + io::describe(v));
    }
    if (s.empty()) io::field_fail(where, "expected token names or ids, got none");
    out.push_back(std::move(s));
  }
}

// A token: its name or its id; null is none.
void read_token(const io::Section& root, const char* key, const json& value, analysis::Token& t) {
  if (value.is_string()) {
    root.read(key, t.name);
    if (t.name.empty()) io::field_fail(root.pointer(key), "expected a token name, got \"\"");
  } else if (value.is_number_integer()) {
    int64_t id = 0;
    root.read(key, id);
    t.id = id;
  } else if (!value.is_null()) {
    io::field_fail(root.pointer(key), "expected a token name or id, got " + io::describe(value));
  }
}

// An optional integer (a layer, a head): an integer, or null for none. Not inlined: for a request without
// such a member GCC would otherwise warn about the branch it never takes (-Warray-bounds).
template <typename Request>
[[gnu::noinline]] void read_optional_int(const io::Section& root, const char* key, const json& value,
                                         Request& request, std::optional<int> Request::*member) {
  if (value.is_null()) return;
  int n = 0;
  root.read(key, n);
  request.*member = n;
}

// The request of `tool` from its JSON: the table's fields and the sequences, every other key an error.
// Errors are RequestError "FIELD: what was expected", as the tools' own checks say them. `kInputs` false
// for a request with no sequences or tokens compiles the inputs' reading out (GCC otherwise warns of
// member pointers past the end of a request smaller than a Sequence).
template <typename Request, bool kInputs = true>
Request read_request(const json& document, const std::string& tool, const io::Table<Request>& fields,
                     const Inputs<Request>& inputs) {
  Request request;
  try {
    const io::Section root(document, "");
    std::vector<std::string> input_keys;
    if constexpr (kInputs)
      for (const Input<Request>& input : inputs) {
        const char* key = input.name;
        const auto& member = input.member;
        input_keys.push_back(key);
        if (!root.has(key)) continue;
        const json& value = document.at(key);
        if (const auto* sequence = std::get_if<analysis::Sequence Request::*>(&member)) {
          read_sequence(root, key, value, request.**sequence);
        } else if (const auto* number = std::get_if<std::optional<int> Request::*>(&member)) {
          read_optional_int(root, key, value, request, *number);
        } else if (const auto* list = std::get_if<std::vector<analysis::Sequence> Request::*>(&member)) {
          read_sequences(root, key, value, request.**list);
        } else {
          read_token(root, key, value, request.*std::get<analysis::Token Request::*>(member));
        }
      }
    root.read_fields(fields, request, input_keys);
  } catch (const io::FieldProblem& problem) {
    // The root's pointer "/FIELD" named as the field itself.
    const std::string field = problem.pointer.empty() ? tool : problem.pointer.substr(1);
    throw analysis::RequestError(io::printable(field + ": " + problem.message));
  }
  return request;
}

// A call's answer from a tool's Output and the result's JSON.
template <typename Result>
Tool::Answer answer(const analysis::Output<Result>& out, json result) {
  return {std::move(result), out.wrote, out.notes};
}

// A row of the table: the request read from JSON, then `run`: json(StudyRun&, const Request&) for a
// tool that reads a run, json(const Request&) for one that stands alone; either may return a Tool::Answer
// instead (the result's JSON with the Output's files and notes, for the command line to print).
template <typename Request, typename Run, bool kInputs = true>
Tool row(const char* name, const char* summary, const Inputs<Request>& inputs,
         const io::Table<Request>& fields, Run run) {
  Tool tool;
  tool.name = name;
  tool.python_name = name;
  tool.summary = summary;
  using List = std::vector<analysis::Sequence> Request::*;
  for (const Input<Request>& input : inputs) {
    if (std::holds_alternative<List>(input.member)) continue;
    tool.fields.push_back(input.name);
    if (tool.prompt_field.empty() && std::holds_alternative<analysis::Sequence Request::*>(input.member))
      tool.prompt_field = input.name;
  }
  for (const io::Field<Request>& field : fields) {
    tool.fields.push_back(field.key);
    const auto* named = std::get_if<io::Named<Request>>(&field.member);
    tool.valid.push_back(named ? io::one_of(named->names) : field.valid);
  }
  io::add_field_infos(tool.rows, "", fields);
  for (const Input<Request>& input : inputs)
    if (std::holds_alternative<List>(input.member)) tool.fields.push_back(input.name);
  for (const Input<Request>& input : inputs) {
    Tool::Input::Kind kind = Tool::Input::kSequence;
    if (std::holds_alternative<List>(input.member)) kind = Tool::Input::kSequences;
    if (std::holds_alternative<analysis::Token Request::*>(input.member)) kind = Tool::Input::kToken;
    if (std::holds_alternative<std::optional<int> Request::*>(input.member)) kind = Tool::Input::kOptionalInt;
    tool.inputs.push_back({input.name, kind, input.meaning});
  }
  tool.reads_run = std::is_invocable_v<Run, analysis::StudyRun&, const Request&>;
  tool.answer = [name = tool.name, fields, inputs, run](analysis::StudyRun* open, const json& j) {
    const Request request = read_request<Request, kInputs>(j, name, fields, inputs);
    const auto called = [&] {
      if constexpr (std::is_invocable_v<Run, analysis::StudyRun&, const Request&>) {
        return run(*open, request);
      } else {
        return run(request);
      }
    }();
    if constexpr (std::is_same_v<std::decay_t<decltype(called)>, Tool::Answer>) {
      return called;
    } else {
      return Tool::Answer{json(called), {}, {}};
    }
  };
  tool.call = [full = tool.answer](analysis::StudyRun* open, const json& j) { return full(open, j).result; };
  return tool;
}

// A row whose request has only its table (no input sequences or tokens).
template <typename Request, typename Run>
Tool row(const char* name, const char* summary, const io::Table<Request>& fields, Run run) {
  return row<Request, Run, false>(name, summary, {}, fields, run);
}

}  // namespace

// ---- One section per tool: its request's table, then its row's call.

const io::Table<analysis::LensRequest>& lens_fields() {
  static const io::Table<analysis::LensRequest> fields = {
      {"save", &analysis::LensRequest::save, "\"\" = write nothing; NAME = RUN/lens/NAME.json and .svg"},
  };
  return fields;
}

const io::Table<analysis::PatchRequest>& patch_fields() {
  static const io::Table<analysis::PatchRequest> fields = {
      {"attribution", &analysis::PatchRequest::attribution, "also attribution patching's estimates"},
      {"save", &analysis::PatchRequest::save, "\"\" = write nothing; NAME = RUN/patching/NAME.json and .svg"},
  };
  return fields;
}

const io::Table<analysis::EvalRequest>& eval_fields() {
  static const io::Table<analysis::EvalRequest> fields = {
      {"split", &analysis::EvalRequest::split, "heldout, or train: a finite dataset's training sequences",
       io::one_of({"heldout", "train"})},
      {"n", &analysis::EvalRequest::n, "sequences", io::at_least(0), io::kFixed,
       "train.eval_size, or the whole training set"},
  };
  return fields;
}

const io::Table<analysis::AblateRequest>& ablate_fields() {
  static const io::Table<analysis::AblateRequest> fields = {
      {"mode", &analysis::AblateRequest::mode, "zero, mean, or resample (z from another held-out sequence)",
       io::rule("zero, mean or resample")},
      {"n", &analysis::AblateRequest::n, "held-out sequences", io::rule(">= 1, or 0"), io::kFixed,
       "train.eval_size"},
      {"per_position", &analysis::AblateRequest::per_position, "also each head at each position alone"},
      {"k", &analysis::AblateRequest::k, "resample: draws to average over", io::rule(">= 1")},
      {"seed", &analysis::AblateRequest::seed, "resample: the draws' seed"},
  };
  return fields;
}

const io::Table<runner::SweepRequest>& sweep_fields() {
  static const io::Table<runner::SweepRequest> fields = {
      {"file", &runner::SweepRequest::file, "the sweep file (docs/sweeps.md)", io::not_empty()},
      {"jobs", &runner::SweepRequest::jobs, "runs at a time", io::at_least(0), io::kFixed,
       "one per two cores"},
      {"print_commands", &runner::SweepRequest::print_commands,
       "train nothing: one `attograd train` command per unfinished run"},
      {"slurm", &runner::SweepRequest::slurm,
       "\"\" = train here; FILE = write a Slurm job-array script for the "
       "unfinished runs"},
      {"cpus_per_task", &runner::SweepRequest::cpus_per_task,
       "with slurm: each task's cpus and train.threads", io::at_least(0), io::kFixed,
       "the runs' train.threads"},
      {"program",
       &runner::SweepRequest::program,
       "the attograd program the runs use",
       {},
       io::kFixed,
       "this program, or attograd on PATH"},
  };
  return fields;
}

const io::Table<dictionary::SaeRequest>& sae_fields() {
  static const io::Table<dictionary::SaeRequest> fields = {
      {"point", &dictionary::SaeRequest::point, "hook point of shape (B, T, D), e.g. blocks.0.mlp.post"},
      {"config", &dictionary::SaeRequest::config,
       "SAE config file (JSON, docs/sae.md); \"\" = every field's default"},
      {"out", &dictionary::SaeRequest::out, "the SAE's folder; \"\" = RUN/sae/POINT"},
      {"resume", &dictionary::SaeRequest::resume, "continue from the folder's checkpoint, bit-exactly"},
  };
  return fields;
}

const io::Table<dictionary::TranscoderRequest>& transcoder_fields() {
  static const io::Table<dictionary::TranscoderRequest> fields = {
      {"layers", &dictionary::TranscoderRequest::layers,
       "layers to train, e.g. \"0,1\"; \"\" = every layer with an MLP"},
      {"config", &dictionary::TranscoderRequest::config,
       "SAE config file (JSON, docs/sae.md); \"\" = every field's default"},
      {"out", &dictionary::TranscoderRequest::out, "the transcoders' folder; \"\" = RUN/transcoders"},
      {"resume", &dictionary::TranscoderRequest::resume,
       "continue each layer from its checkpoint, bit-exactly"},
      {"cross_layer", &dictionary::TranscoderRequest::cross_layer,
       "one cross-layer transcoder: layer l's features write to every MLP output from l on"},
  };
  return fields;
}

const io::Table<attribution::GraphRequest>& graph_fields() {
  static const io::Table<attribution::GraphRequest> fields = {
      {"transcoders", &attribution::GraphRequest::transcoders,
       "the transcoders' folder; \"\" = RUN/transcoders"},
      {"node_threshold", &attribution::GraphRequest::node_threshold,
       "keep the nodes holding this fraction of the influence", io::at_least(0).up_to(1)},
      {"edge_threshold", &attribution::GraphRequest::edge_threshold,
       "keep the edges holding this fraction of the influence", io::at_least(0).up_to(1)},
      {"save", &attribution::GraphRequest::save,
       "\"\" = write nothing; NAME = RUN/graphs/NAME/graph.json, adjacency.npy and graph.html",
       io::rule("letters, digits, _, -, ., at most 100 characters")},
      {"qk", &attribution::GraphRequest::qk,
       "L.H.K: also the QK attribution of head H of layer L from the last position to key K; \"\" = none"},
  };
  return fields;
}

const io::Table<analysis::CircuitsRequest>& circuits_fields() {
  static const io::Table<analysis::CircuitsRequest> fields = {
      {"composition", &analysis::CircuitsRequest::composition, "the composition scores (needs >= 2 layers)"},
      {"processed", &analysis::CircuitsRequest::processed,
       "read the TransformerLens-processed weights (never saved)"},
      {"save", &analysis::CircuitsRequest::save,
       "write RUN/circuits.json and RUN/circuits/*.svg, rebuild report.html"},
  };
  return fields;
}

const io::Table<dictionary::SaeSyntheticRequest>& sae_synthetic_fields() {
  static const io::Table<dictionary::SaeSyntheticRequest> fields = {
      {"features", &dictionary::SaeSyntheticRequest::features, "true features", io::at_least(1).below(16385)},
      {"dim", &dictionary::SaeSyntheticRequest::dim, "their dimension", io::at_least(1).below(16385)},
      {"p", &dictionary::SaeSyntheticRequest::p, "each feature's probability of being active",
       io::at_least(1e-6).below(1.0000001)},
      {"sae_features", &dictionary::SaeSyntheticRequest::sae_features,
       "the SAE's features (at least features)", io::at_least(1).below(65537)},
      {"seed", &dictionary::SaeSyntheticRequest::seed, "seed of the source and the SAE"},
      {"config", &dictionary::SaeSyntheticRequest::config, "SAE config file; \"\" = TopK, k 6, lr 0.003"},
  };
  return fields;
}

const io::Table<analysis::FourierRequest>& fourier_fields() {
  static const io::Table<analysis::FourierRequest> fields = {
      {"save", &analysis::FourierRequest::save, "write RUN/fourier/ and rebuild report.html"},
  };
  return fields;
}

namespace {  // a tool with no hand-written command: its table needs no declaration (study/fields.h)

const io::Table<analysis::ScoresRequest>& scores_fields() {
  static const io::Table<analysis::ScoresRequest> fields = {};
  return fields;
}

Tool scores_tool() {
  Tool t =
      row("scores", "every head's task, previous-token, first-token, induction and duplicate-token scores",
          {{"ids", &analysis::ScoresRequest::ids,
            "a sequence of your own, token names (BOS put in front when missing), a whole sequence of the "
            "task (T + 1 tokens); repeat for more; default: the held-out set"}},
          scores_fields(), [](analysis::StudyRun& run, const analysis::ScoresRequest& r) {
            const auto out = analysis::scores(run, r);
            return answer(out, findings::head_scores_to_json(out.result));
          });
  t.json_shape = "{step, heads: [...]}";
  t.footer =
      "Computed at the run's checkpoint on its held-out set, as training computes scores.json\n"
      "(docs/head-scores.md); prints only.";
  t.text = [](const analysis::StudyRun* run, const json& request, const json& result) {
    const size_t given = request.contains("ids") ? request.at("ids").size() : 0;
    return Tool::Text{"head scores on " +
                          (given ? std::to_string(given) + " given"
                                 : std::to_string(run->config.train.eval_size) + " held-out") +
                          " sequences\n\n",
                      findings::head_scores_table(findings::head_scores_from_json(result, "scores").heads)};
  };
  return t;
}

const io::Table<analysis::EntropyRequest>& entropy_fields() {
  static const io::Table<analysis::EntropyRequest> fields = {
      {"n", &analysis::EntropyRequest::n, "held-out sequences", io::at_least(0), io::kFixed,
       "0: train.eval_size"},
  };
  return fields;
}

Tool entropy_tool() {
  Tool t =
      row("entropy", "each layer's and head's mean attention entropy, on held-out sequences or yours",
          {{"ids", &analysis::EntropyRequest::ids,
            "a sequence of your own, token names (BOS put in front when missing), a whole sequence of the "
            "task (T + 1 tokens); repeat for more; default: held-out sequences"}},
          entropy_fields(), [](analysis::StudyRun& run, const analysis::EntropyRequest& r) {
            const auto out = analysis::entropy(run, r);
            return answer(out, findings::entropy_to_json(out.result));
          });
  t.json_shape = "{step, sequences, rows, uniform, layers: [...], heads: [...]}";
  t.footer =
      "In nats, averaged over every query position i: 0 is a head on one key, log(i + 1) one spread evenly.\n"
      "Example: attograd entropy runs/induction --n 16";
  t.text = [](const analysis::StudyRun*, const json& request, const json& result) {
    const findings::EntropyResult r = findings::entropy_from_json(result);
    char uniform[32];
    std::snprintf(uniform, sizeof uniform, "%.3f", r.uniform);
    return Tool::Text{"mean attention entropy (nats) on " + std::to_string(r.sequences) +
                          (request.contains("ids") ? " given" : " held-out") + " sequence" +
                          (r.sequences == 1 ? ", " : "s, ") + std::to_string(r.rows) +
                          " positions; uniform attention: " + uniform + "\n\n",
                      findings::entropy_table(r)};
  };
  return t;
}

}  // namespace

const io::Table<analysis::GradcheckRequest>& gradcheck_fields() {
  static const io::Table<analysis::GradcheckRequest> fields = {
      {"config", &analysis::GradcheckRequest::config, "the config file", io::not_empty()},
      {"set", &analysis::GradcheckRequest::set, "overrides key.path=value"},
      {"tolerance", &analysis::GradcheckRequest::tolerance, "worst relative error allowed", io::above(0)},
  };
  return fields;
}

const io::Table<analysis::ForwardRequest>& forward_fields() {
  static const io::Table<analysis::ForwardRequest> fields = {};
  return fields;
}

const io::Table<analysis::GenerateRequest>& generate_fields() {
  static const io::Table<analysis::GenerateRequest> fields = {
      {"prompt", &analysis::GenerateRequest::prompt,
       "the prompt as text: a text model's characters, else token names"},
      {"max_new", &analysis::GenerateRequest::max_new, "tokens to generate, the context sliding past max_len",
       io::rule("0..100000, or -1"), io::kFixed, "-1: until the model has read max_len tokens"},
      {"temperature", &analysis::GenerateRequest::temperature,
       "0: greedy (argmax); otherwise sample softmax(logits / X)", io::rule("finite, >= 0")},
      {"top_k", &analysis::GenerateRequest::top_k, "sample among the K most likely tokens only",
       io::rule(">= 0"), io::kFixed, "0: every token"},
      {"seed", &analysis::GenerateRequest::seed, "seed of the sampling: the same seed, the same tokens"},
      {"prepend_bos", &analysis::GenerateRequest::prepend_bos,
       "put the task's BOS in front of a prompt that lacks it (an imported GPT-2: <|endoftext|>)"},
  };
  return fields;
}

const io::Table<SweepCollectRequest>& sweep_collect_fields() {
  static const io::Table<SweepCollectRequest> fields = {
      {"out", &SweepCollectRequest::out, "the sweep's out folder", io::not_empty()},
  };
  return fields;
}

const io::Table<analysis::LessonRequest>& lesson_fields() {
  static const io::Table<analysis::LessonRequest> fields = {
      {"section", &analysis::LessonRequest::section, "the section, 1..7; 0 = the whole lesson",
       io::at_least(0).below(analysis::kLessonSections + 1)},
  };
  return fields;
}

const io::Table<analysis::AttendRequest>& attend_fields() {
  static const io::Table<analysis::AttendRequest> fields = {
      {"svg", &analysis::AttendRequest::svg,
       "\"\" = write nothing; FILE = the shown heads as an SVG picture"},
  };
  return fields;
}

const io::Table<analysis::CompareRequest>& compare_fields() {
  static const io::Table<analysis::CompareRequest> fields = {
      {"svg", &analysis::CompareRequest::svg,
       "\"\" = write nothing; FILE = A, B and A - B per head as an SVG picture"},
  };
  return fields;
}

const io::Table<analysis::DetectRequest>& detect_fields() {
  static const io::Table<analysis::DetectRequest> fields = {
      {"pattern", &analysis::DetectRequest::pattern,
       "previous, duplicate, induction, first, or a rule FILE.json", io::rule("a rule name or a FILE.json")},
      {"mode", &analysis::DetectRequest::mode,
       "mul: the share of attention where the pattern says; abs: 1 - mean |A - D| * T",
       io::one_of({"mul", "abs"})},
      {"n", &analysis::DetectRequest::n, "held-out sequences", io::at_least(0), io::kFixed,
       "0: train.eval_size"},
  };
  return fields;
}

const io::Table<runner::BenchRequest>& bench_fields() {
  static const io::Table<runner::BenchRequest> fields = {
      {"config", &runner::BenchRequest::config, "the config file", io::not_empty()},
      {"sets", &runner::BenchRequest::sets, "config overrides, key.path=value"},
      {"steps", &runner::BenchRequest::steps, "timed steps", io::at_least(1)},
      {"warmup", &runner::BenchRequest::warmup, "untimed warm-up steps", io::at_least(0)},
      {"threads", &runner::BenchRequest::threads, "threads", io::at_least(0), io::kFixed,
       "the config's train.threads"},
      {"peak_gflops", &runner::BenchRequest::peak_gflops, "the machine's peak for mfu", io::at_least(0),
       io::kFixed, "measured"},
      {"forward", &runner::BenchRequest::forward,
       "forward passes without gradients instead of training steps"},
  };
  return fields;
}

const io::Table<imports::ImportRequest>& import_fields() {
  static const io::Table<imports::ImportRequest> fields = {
      {"src", &imports::ImportRequest::src, "the Hugging Face model folder (config.json, model.safetensors)",
       io::not_empty()},
      {"out", &imports::ImportRequest::out, "the run folder to write (new or empty)", io::not_empty()},
      {"family", &imports::ImportRequest::family, "the model family; auto reads config.json's model_type",
       io::one_of({"auto", "gpt2", "gpt_neo", "gpt_neox", "llama", "mistral", "qwen2"})},
      {"process", &imports::ImportRequest::process,
       "save TransformerLens's processed weights (fold_ln, center_writing_weights, center_unembed, "
       "fold_value_biases)"},
      {"text", &imports::ImportRequest::text,
       "a UTF-8 text file the run's tools draw sequences from, encoded by the model's tokenizer.json (the "
       "task becomes text, unit bpe)"},
  };
  return fields;
}

const io::Table<dictionary::TmsRequest>& tms_fields() {
  static const io::Table<dictionary::TmsRequest> fields = {
      {"n", &dictionary::TmsRequest::n, "features", io::at_least(2).below(1001)},
      {"m", &dictionary::TmsRequest::m, "hidden dimensions (fewer than n)", io::at_least(1).below(1001)},
      {"sparsity", &dictionary::TmsRequest::sparsity, "probability that a feature is 0",
       io::at_least(0).below(0.99991)},
      {"importance", &dictionary::TmsRequest::importance, "feature i's importance is importance^i",
       io::at_least(0.01).below(1.0000001)},
      {"steps", &dictionary::TmsRequest::steps, "training steps", io::at_least(1).below(1000001)},
      {"seed", &dictionary::TmsRequest::seed, "seed"},
  };
  return fields;
}

std::string shown_default(const io::FieldInfo& row) {
  if (!row.default_means.empty()) return row.default_means;
  if (row.type == "boolean" || row.default_value == "\"\"" || row.default_value == "[]" ||
      row.default_value == "null")
    return "";
  if (row.type == "string") return json::parse(row.default_value).get<std::string>();
  return row.default_value;
}

const std::vector<Tool>& tools() {
  static const std::vector<Tool> rows = {
      row("demo", "the seed lesson's walkthrough: self-attention from scratch", lesson_fields(),
          [](const analysis::LessonRequest& r) {
            return findings::lesson_to_json(analysis::lesson(r).result);
          }),
      row("bench", "time training steps (or forward passes) of a config's model", bench_fields(),
          [](const runner::BenchRequest& r) { return findings::bench_to_json(runner::bench(r).result); }),
      [] {
        Tool t = row("forward", "one input through the model: logits, predictions, every head's attention",
                     {{"input", &analysis::ForwardRequest::input}}, forward_fields(),
                     [](analysis::StudyRun& run, const analysis::ForwardRequest& r) {
                       return findings::forward_to_json(analysis::forward(run, r).result);
                     });
        t.python_name = "forward_report";  // Run.forward is the model's logits (with hooks)
        return t;
      }(),
      row("generate", "continue a prompt a token at a time: greedy or sampled (KV cache)",
          {{"tokens", &analysis::GenerateRequest::tokens}}, generate_fields(),
          [](analysis::StudyRun& run, const analysis::GenerateRequest& r) {
            return findings::generate_to_json(analysis::generate(run, r).result);
          }),
      row("attend", "where each head looks on one input",
          {{"input", &analysis::AttendRequest::input},
           {"layer", &analysis::AttendRequest::layer},
           {"head", &analysis::AttendRequest::head}},
          attend_fields(),
          [](analysis::StudyRun& run, const analysis::AttendRequest& r) {
            return findings::attend_to_json(analysis::attend(run, r).result);
          }),
      row("compare", "two inputs of the same length: each head's maps and their total variation",
          {{"a", &analysis::CompareRequest::a},
           {"b", &analysis::CompareRequest::b},
           {"layer", &analysis::CompareRequest::layer},
           {"head", &analysis::CompareRequest::head}},
          compare_fields(),
          [](analysis::StudyRun& run, const analysis::CompareRequest& r) {
            return findings::compare_to_json(analysis::compare(run, r).result);
          }),
      row("detect", "every head scored against a detection pattern (TransformerLens's detect_head)",
          {{"input", &analysis::DetectRequest::input}}, detect_fields(),
          [](analysis::StudyRun& run, const analysis::DetectRequest& r) {
            return findings::detect_to_json(analysis::detect(run, r).result);
          }),
      row("eval", "held-out accuracy and loss of a run's last checkpoint", eval_fields(),
          [](analysis::StudyRun& run, const analysis::EvalRequest& r) {
            return findings::eval_to_json(analysis::evaluate(run, r).result);
          }),
      row("patch", "activation patching: which activation, at which position, carries the answer",
          {{"clean", &analysis::PatchRequest::clean},
           {"corrupt", &analysis::PatchRequest::corrupt},
           {"answer", &analysis::PatchRequest::answer},
           {"wrong", &analysis::PatchRequest::wrong}},
          patch_fields(),
          [](analysis::StudyRun& run, const analysis::PatchRequest& r) {
            return findings::patching_to_json(analysis::patch(run, r).result, false);
          }),
      row("lens", "logit lens and residual decomposition: where the answer appears, and who wrote it",
          {{"input", &analysis::LensRequest::input},
           {"answer", &analysis::LensRequest::answer},
           {"wrong", &analysis::LensRequest::wrong}},
          lens_fields(),
          [](analysis::StudyRun& run, const analysis::LensRequest& r) {
            return findings::lens_to_json(analysis::lens(run, r).result, false);
          }),
      scores_tool(),
      entropy_tool(),
      row("ablate",
          "head ablation: held-out accuracy and loss with each head zeroed, mean-ablated or resampled",
          {{"ids", &analysis::AblateRequest::ids}}, ablate_fields(),
          [](analysis::StudyRun& run, const analysis::AblateRequest& r) {
            return findings::mode_ablation_to_json(analysis::ablate(run, r).result);
          }),
      row("circuits", "the circuit read from the weights: composition, copying, positional QK, DLA",
          circuits_fields(),
          [](analysis::StudyRun& run, const analysis::CircuitsRequest& r) {
            return findings::circuits_to_json(analysis::circuits(run, r).result, false);
          }),
      row("fourier", "a modular-addition model in the Fourier basis: key frequencies, restricted loss, Gini",
          fourier_fields(),
          [](analysis::StudyRun& run, const analysis::FourierRequest& r) {
            return findings::fourier_to_json(analysis::fourier(run, r).result);
          }),
      row("gradcheck", "whole-model finite-difference gradient check in float64 of a config's architecture",
          gradcheck_fields(),
          [](const analysis::GradcheckRequest& r) {
            return findings::gradcheck_to_json(analysis::gradcheck(r).result);
          }),
      row("sae", "a sparse autoencoder trained on a run's activations at a hook point, and its evaluation",
          sae_fields(),
          [](analysis::StudyRun& run, const dictionary::SaeRequest& r) {
            return findings::sae_eval_to_json(dictionary::sae(run, r).result.eval);
          }),
      row("transcoder",
          "per-layer or cross-layer transcoders (MLP input to MLP outputs) trained on a run's activations, "
          "and their evaluation",
          transcoder_fields(),
          [](analysis::StudyRun& run, const dictionary::TranscoderRequest& r) {
            return findings::transcoder_eval_to_json(dictionary::transcoder(run, r).result.eval);
          }),
      row("graph",
          "the attribution graph of one prompt: exact direct effects between features, errors, tokens, "
          "logits",
          {{"input", &attribution::GraphRequest::input}, {"target", &attribution::GraphRequest::target}},
          graph_fields(),
          [](analysis::StudyRun& run, const attribution::GraphRequest& r) {
            const auto out = attribution::graph(run, r);
            return findings::graph_to_json(out.result);
          }),
      row("sae_synthetic",
          "an SAE on synthetic sparse features with known directions: how well it recovers them",
          sae_synthetic_fields(),
          [](const dictionary::SaeSyntheticRequest& r) {
            return findings::sae_synthetic_to_json(dictionary::sae_synthetic(r).result);
          }),
      [] {
        Tool t =
            row("import", "a Hugging Face model folder (GPT-2, GPT-Neo, GPT-NeoX/Pythia, Llama) as a run",
                import_fields(), [](const imports::ImportRequest& r) {
                  return findings::import_to_json(imports::import_model(r).result);
                });
        t.python_name = "import_model";  // import is Python's keyword
        return t;
      }(),
      row("tms", "a toy model of superposition: n features in m dims at one sparsity", tms_fields(),
          [](const dictionary::TmsRequest& r) {
            return findings::tms_panel_to_json(dictionary::tms(r).result.panels.front());
          }),
      row("sweep", "train every point of a sweep's grid (or plan it for a scheduler); summarise the runs",
          sweep_fields(),
          [](const runner::SweepRequest& r) {
            return json(findings::sweep_result_to_json(runner::sweep(r).result));
          }),
      row("sweep_collect", "a sweep's summary from its run folders: summary.json, summary.csv, index.html",
          sweep_collect_fields(),
          [](const SweepCollectRequest& r) {
            return json(findings::sweep_summary_to_json(runner::sweep_collect(r.out).result));
          }),
  };
  return rows;
}

const Tool& tool(const std::string& name) {
  for (const Tool& t : tools())
    if (name == t.name) return t;
  throw analysis::RequestError(name + ": no such tool");
}

}  // namespace study
