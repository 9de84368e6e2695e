#include "study/tools.h"

#include <type_traits>
#include <utility>
#include <variant>

#include "io/field_table.h"
#include "io/printable.h"
#include "study/ablation.h"
#include "study/attention.h"
#include "study/bench.h"
#include "study/circuits.h"
#include "study/detect.h"
#include "study/evaluation.h"
#include "study/fourier.h"
#include "study/generate.h"
#include "study/gradcheck.h"
#include "study/graph.h"
#include "study/import_model.h"
#include "study/lens.h"
#include "study/lesson.h"
#include "study/patching.h"
#include "study/sae_tool.h"
#include "study/scores.h"
#include "study/sweep.h"
#include "study/tms.h"
#include "study/transcoder.h"

namespace study {

namespace {

using nlohmann::json;

// A request's inputs beyond its table: sequences (a JSON string is token names, an array of integers raw
// ids), lists of sequences (a JSON array of them: the user's prompts), tokens (a string is a name, an integer
// an id) and optional integers (a layer, a head: absent or null for none), in the order a caller gives them
// (a list of sequences after the table's fields, so it never takes a positional argument's place).
template <typename Request>
using Inputs = std::vector<
    std::pair<const char*, std::variant<Sequence Request::*, Token Request::*, std::optional<int> Request::*,
                                        std::vector<Sequence> Request::*>>>;

// A sequence: a string of token names, an array of ids or {"prompt": TEXT}, not empty.
void read_sequence(const io::Section& root, const char* key, const json& value, Sequence& s) {
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
void read_sequences(const io::Section& root, const char* key, const json& value, std::vector<Sequence>& out) {
  const std::string pointer = root.pointer(key);
  if (!value.is_array() || value.empty())
    io::field_fail(pointer, "expected a list of sequences (token-name strings or id arrays), got " +
                                io::describe(value));
  for (size_t i = 0; i < value.size(); ++i) {
    const json& v = value[i];
    const std::string where = pointer + "/" + std::to_string(i);
    Sequence s;
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
void read_token(const io::Section& root, const char* key, const json& value, Token& t) {
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
      for (const auto& [key, member] : inputs) {
        input_keys.push_back(key);
        if (!root.has(key)) continue;
        const json& value = document.at(key);
        if (const auto* sequence = std::get_if<Sequence Request::*>(&member)) {
          read_sequence(root, key, value, request.**sequence);
        } else if (const auto* number = std::get_if<std::optional<int> Request::*>(&member)) {
          read_optional_int(root, key, value, request, *number);
        } else if (const auto* list = std::get_if<std::vector<Sequence> Request::*>(&member)) {
          read_sequences(root, key, value, request.**list);
        } else {
          read_token(root, key, value, request.*std::get<Token Request::*>(member));
        }
      }
    root.read_fields(fields, request, input_keys);
  } catch (const io::FieldProblem& problem) {
    // The root's pointer "/FIELD" named as the field itself.
    const std::string field = problem.pointer.empty() ? tool : problem.pointer.substr(1);
    throw RequestError(io::printable(field + ": " + problem.message));
  }
  return request;
}

// A row of the table: the request read from JSON, then `run`: json(StudyRun&, const Request&) for a
// tool that reads a run, json(const Request&) for one that stands alone.
template <typename Request, typename Run, bool kInputs = true>
Tool row(const char* name, const char* summary, const Inputs<Request>& inputs,
         const io::Table<Request>& fields, Run run) {
  Tool tool;
  tool.name = name;
  tool.python_name = name;
  tool.summary = summary;
  using List = std::vector<Sequence> Request::*;
  for (const auto& input : inputs) {
    if (std::holds_alternative<List>(input.second)) continue;
    tool.fields.push_back(input.first);
    if (tool.prompt_field.empty() && std::holds_alternative<Sequence Request::*>(input.second))
      tool.prompt_field = input.first;
  }
  for (const io::Field<Request>& field : fields) tool.fields.push_back(field.key);
  for (const auto& input : inputs)
    if (std::holds_alternative<List>(input.second)) tool.fields.push_back(input.first);
  tool.reads_run = std::is_invocable_v<Run, StudyRun&, const Request&>;
  tool.call = [name = tool.name, fields, inputs, run](StudyRun* open, const json& j) -> json {
    const Request request = read_request<Request, kInputs>(j, name, fields, inputs);
    if constexpr (std::is_invocable_v<Run, StudyRun&, const Request&>) {
      return run(*open, request);
    } else {
      return run(request);
    }
  };
  return tool;
}

// A row whose request has only its table (no input sequences or tokens).
template <typename Request, typename Run>
Tool row(const char* name, const char* summary, const io::Table<Request>& fields, Run run) {
  return row<Request, Run, false>(name, summary, {}, fields, run);
}

// ---- One section per tool: its request's table, then its row's call.

const io::Table<LensRequest>& lens_fields() {
  static const io::Table<LensRequest> fields = {
      {"save", &LensRequest::save, "\"\" = write nothing; NAME = RUN/lens/NAME.json and .svg"},
  };
  return fields;
}

const io::Table<PatchRequest>& patch_fields() {
  static const io::Table<PatchRequest> fields = {
      {"attribution", &PatchRequest::attribution, "also attribution patching's estimates"},
      {"save", &PatchRequest::save, "\"\" = write nothing; NAME = RUN/patching/NAME.json and .svg"},
  };
  return fields;
}

const io::Table<EvalRequest>& eval_fields() {
  static const io::Table<EvalRequest> fields = {
      {"split", &EvalRequest::split, "heldout, or train: a finite dataset's training sequences",
       io::one_of({"heldout", "train"})},
      {"n", &EvalRequest::n, "sequences", io::at_least(0), io::kFixed,
       "train.eval_size, or the whole training set"},
  };
  return fields;
}

const io::Table<AblateRequest>& ablate_fields() {
  static const io::Table<AblateRequest> fields = {
      {"mode", &AblateRequest::mode, "zero, mean, or resample (z from another held-out sequence)",
       io::rule("zero, mean or resample")},
      {"n", &AblateRequest::n, "held-out sequences", io::rule(">= 1, or 0"), io::kFixed, "train.eval_size"},
      {"per_position", &AblateRequest::per_position, "also each head at each position alone"},
      {"k", &AblateRequest::k, "resample: draws to average over", io::rule(">= 1")},
      {"seed", &AblateRequest::seed, "resample: the draws' seed"},
  };
  return fields;
}

const io::Table<SweepRequest>& sweep_fields() {
  static const io::Table<SweepRequest> fields = {
      {"file", &SweepRequest::file, "the sweep file (docs/sweeps.md)", io::not_empty()},
      {"jobs", &SweepRequest::jobs, "runs at a time", io::at_least(0), io::kFixed, "one per two cores"},
      {"print_commands", &SweepRequest::print_commands,
       "train nothing: one `attograd train` command per unfinished run"},
      {"slurm", &SweepRequest::slurm,
       "\"\" = train here; FILE = write a Slurm job-array script for the "
       "unfinished runs"},
      {"cpus_per_task", &SweepRequest::cpus_per_task, "with slurm: each task's cpus and train.threads",
       io::at_least(0), io::kFixed, "the runs' train.threads"},
      {"program",
       &SweepRequest::program,
       "the attograd program the runs use",
       {},
       io::kFixed,
       "this program, or attograd on PATH"},
  };
  return fields;
}

const io::Table<SaeRequest>& sae_fields() {
  static const io::Table<SaeRequest> fields = {
      {"point", &SaeRequest::point, "hook point of shape (B, T, D), e.g. blocks.0.mlp.post"},
      {"config", &SaeRequest::config, "SAE config file (JSON, docs/sae.md); \"\" = every field's default"},
      {"out", &SaeRequest::out, "the SAE's folder; \"\" = RUN/sae/POINT"},
      {"resume", &SaeRequest::resume, "continue from the folder's checkpoint, bit-exactly"},
  };
  return fields;
}

const io::Table<TranscoderRequest>& transcoder_fields() {
  static const io::Table<TranscoderRequest> fields = {
      {"layers", &TranscoderRequest::layers, "layers to train, e.g. \"0,1\"; \"\" = every layer with an MLP"},
      {"config", &TranscoderRequest::config,
       "SAE config file (JSON, docs/sae.md); \"\" = every field's default"},
      {"out", &TranscoderRequest::out, "the transcoders' folder; \"\" = RUN/transcoders"},
      {"resume", &TranscoderRequest::resume, "continue each layer from its checkpoint, bit-exactly"},
      {"cross_layer", &TranscoderRequest::cross_layer,
       "one cross-layer transcoder: layer l's features write to every MLP output from l on"},
  };
  return fields;
}

const io::Table<GraphRequest>& graph_fields() {
  static const io::Table<GraphRequest> fields = {
      {"transcoders", &GraphRequest::transcoders, "the transcoders' folder; \"\" = RUN/transcoders"},
      {"node_threshold", &GraphRequest::node_threshold,
       "keep the nodes holding this fraction of the influence", io::at_least(0).up_to(1)},
      {"edge_threshold", &GraphRequest::edge_threshold,
       "keep the edges holding this fraction of the influence", io::at_least(0).up_to(1)},
      {"save", &GraphRequest::save,
       "\"\" = write nothing; NAME = RUN/graphs/NAME/graph.json and adjacency.npy"},
  };
  return fields;
}

const io::Table<CircuitsRequest>& circuits_fields() {
  static const io::Table<CircuitsRequest> fields = {
      {"composition", &CircuitsRequest::composition, "the composition scores (needs >= 2 layers)"},
      {"processed", &CircuitsRequest::processed, "read the TransformerLens-processed weights (never saved)"},
      {"save", &CircuitsRequest::save, "write RUN/circuits.json and RUN/circuits/*.svg, rebuild report.html"},
  };
  return fields;
}

const io::Table<SaeSyntheticRequest>& sae_synthetic_fields() {
  static const io::Table<SaeSyntheticRequest> fields = {
      {"features", &SaeSyntheticRequest::features, "true features", io::at_least(1).below(16385)},
      {"dim", &SaeSyntheticRequest::dim, "their dimension", io::at_least(1).below(16385)},
      {"p", &SaeSyntheticRequest::p, "each feature's probability of being active",
       io::at_least(1e-6).below(1.0000001)},
      {"sae_features", &SaeSyntheticRequest::sae_features, "the SAE's features (at least features)",
       io::at_least(1).below(65537)},
      {"seed", &SaeSyntheticRequest::seed, "seed of the source and the SAE"},
      {"config", &SaeSyntheticRequest::config, "SAE config file; \"\" = TopK, k 6, lr 0.003"},
  };
  return fields;
}

const io::Table<FourierRequest>& fourier_fields() {
  static const io::Table<FourierRequest> fields = {
      {"save", &FourierRequest::save, "write RUN/fourier/ and rebuild report.html"},
  };
  return fields;
}

const io::Table<ScoresRequest>& scores_fields() {
  static const io::Table<ScoresRequest> fields = {};
  return fields;
}

const io::Table<GradcheckRequest>& gradcheck_fields() {
  static const io::Table<GradcheckRequest> fields = {
      {"config", &GradcheckRequest::config, "the config file", io::not_empty()},
      {"set", &GradcheckRequest::set, "overrides key.path=value"},
      {"tolerance", &GradcheckRequest::tolerance, "worst relative error allowed", io::above(0)},
  };
  return fields;
}

const io::Table<ForwardRequest>& forward_fields() {
  static const io::Table<ForwardRequest> fields = {};
  return fields;
}

const io::Table<GenerateRequest>& generate_fields() {
  static const io::Table<GenerateRequest> fields = {
      {"prompt", &GenerateRequest::prompt, "the prompt as text: a text model's characters, else token names"},
      {"max_new", &GenerateRequest::max_new, "tokens to generate, the context sliding past max_len",
       io::rule("0..100000, or -1"), io::kFixed, "-1: until the model has read max_len tokens"},
      {"temperature", &GenerateRequest::temperature,
       "0: greedy (argmax); otherwise sample softmax(logits / X)", io::rule("finite, >= 0")},
      {"top_k", &GenerateRequest::top_k, "sample among the K most likely tokens only", io::rule(">= 0"),
       io::kFixed, "0: every token"},
      {"seed", &GenerateRequest::seed, "seed of the sampling: the same seed, the same tokens"},
  };
  return fields;
}

// sweep_collect's request: the sweep's out folder.
struct SweepCollectRequest {
  std::string out;
};

const io::Table<SweepCollectRequest>& sweep_collect_fields() {
  static const io::Table<SweepCollectRequest> fields = {
      {"out", &SweepCollectRequest::out, "the sweep's out folder", io::not_empty()},
  };
  return fields;
}

const io::Table<LessonRequest>& lesson_fields() {
  static const io::Table<LessonRequest> fields = {
      {"section", &LessonRequest::section, "the section, 1..7; 0 = the whole lesson",
       io::at_least(0).below(kLessonSections + 1)},
  };
  return fields;
}

const io::Table<AttendRequest>& attend_fields() {
  static const io::Table<AttendRequest> fields = {
      {"svg", &AttendRequest::svg, "\"\" = write nothing; FILE = the shown heads as an SVG picture"},
  };
  return fields;
}

const io::Table<CompareRequest>& compare_fields() {
  static const io::Table<CompareRequest> fields = {
      {"svg", &CompareRequest::svg, "\"\" = write nothing; FILE = A, B and A - B per head as an SVG picture"},
  };
  return fields;
}

const io::Table<DetectRequest>& detect_fields() {
  static const io::Table<DetectRequest> fields = {
      {"pattern", &DetectRequest::pattern, "previous, duplicate, induction, first, or a rule FILE.json",
       io::rule("a rule name or a FILE.json")},
      {"mode", &DetectRequest::mode,
       "mul: the share of attention where the pattern says; abs: 1 - mean |A - D| * T",
       io::one_of({"mul", "abs"})},
      {"n", &DetectRequest::n, "held-out sequences", io::at_least(0), io::kFixed, "0: train.eval_size"},
  };
  return fields;
}

const io::Table<BenchRequest>& bench_fields() {
  static const io::Table<BenchRequest> fields = {
      {"config", &BenchRequest::config, "the config file", io::not_empty()},
      {"sets", &BenchRequest::sets, "config overrides, key.path=value"},
      {"steps", &BenchRequest::steps, "timed steps", io::at_least(1)},
      {"warmup", &BenchRequest::warmup, "untimed warm-up steps", io::at_least(0)},
      {"threads", &BenchRequest::threads, "threads", io::at_least(0), io::kFixed,
       "the config's train.threads"},
      {"peak_gflops", &BenchRequest::peak_gflops, "the machine's peak for mfu", io::at_least(0), io::kFixed,
       "measured"},
      {"forward", &BenchRequest::forward, "forward passes without gradients instead of training steps"},
  };
  return fields;
}

const io::Table<ImportRequest>& import_fields() {
  static const io::Table<ImportRequest> fields = {
      {"src", &ImportRequest::src, "the Hugging Face model folder (config.json, model.safetensors)",
       io::not_empty()},
      {"out", &ImportRequest::out, "the run folder to write (new or empty)", io::not_empty()},
      {"family", &ImportRequest::family, "the model family; auto reads config.json's model_type",
       io::one_of({"auto", "gpt2", "gpt_neo", "gpt_neox", "llama"})},
      {"process", &ImportRequest::process,
       "save TransformerLens's processed weights (fold_ln, center_writing_weights, center_unembed, "
       "fold_value_biases)"},
      {"text", &ImportRequest::text,
       "a UTF-8 text file the run's tools draw sequences from, encoded by the model's tokenizer.json (the "
       "task becomes text, unit bpe)"},
  };
  return fields;
}

const io::Table<TmsRequest>& tms_fields() {
  static const io::Table<TmsRequest> fields = {
      {"n", &TmsRequest::n, "features", io::at_least(2).below(1001)},
      {"m", &TmsRequest::m, "hidden dimensions (fewer than n)", io::at_least(1).below(1001)},
      {"sparsity", &TmsRequest::sparsity, "probability that a feature is 0", io::at_least(0).below(0.99991)},
      {"importance", &TmsRequest::importance, "feature i's importance is importance^i",
       io::at_least(0.01).below(1.0000001)},
      {"steps", &TmsRequest::steps, "training steps", io::at_least(1).below(1000001)},
      {"seed", &TmsRequest::seed, "seed"},
  };
  return fields;
}

}  // namespace

const std::vector<Tool>& tools() {
  static const std::vector<Tool> rows = {
      row("demo", "the seed lesson's walkthrough: self-attention from scratch", lesson_fields(),
          [](const LessonRequest& r) { return findings::lesson_to_json(lesson(r).result); }),
      row("bench", "time training steps (or forward passes) of a config's model", bench_fields(),
          [](const BenchRequest& r) { return findings::bench_to_json(bench(r).result); }),
      [] {
        Tool t = row("forward", "one input through the model: logits, predictions, every head's attention",
                     {{"input", &ForwardRequest::input}}, forward_fields(),
                     [](StudyRun& run, const ForwardRequest& r) {
                       return findings::forward_to_json(forward(run, r).result);
                     });
        t.python_name = "forward_report";  // Run.forward is the model's logits (with hooks)
        return t;
      }(),
      row("generate", "continue a prompt a token at a time: greedy or sampled (KV cache)",
          {{"tokens", &GenerateRequest::tokens}}, generate_fields(),
          [](StudyRun& run, const GenerateRequest& r) {
            return findings::generate_to_json(generate(run, r).result);
          }),
      row("attend", "where each head looks on one input",
          {{"input", &AttendRequest::input},
           {"layer", &AttendRequest::layer},
           {"head", &AttendRequest::head}},
          attend_fields(),
          [](StudyRun& run, const AttendRequest& r) {
            return findings::attend_to_json(attend(run, r).result);
          }),
      row("compare", "two inputs of the same length: each head's maps and their total variation",
          {{"a", &CompareRequest::a},
           {"b", &CompareRequest::b},
           {"layer", &CompareRequest::layer},
           {"head", &CompareRequest::head}},
          compare_fields(),
          [](StudyRun& run, const CompareRequest& r) {
            return findings::compare_to_json(compare(run, r).result);
          }),
      row("detect", "every head scored against a detection pattern (TransformerLens's detect_head)",
          {{"input", &DetectRequest::input}}, detect_fields(),
          [](StudyRun& run, const DetectRequest& r) {
            return findings::detect_to_json(detect(run, r).result);
          }),
      row("eval", "held-out accuracy and loss of a run's last checkpoint", eval_fields(),
          [](StudyRun& run, const EvalRequest& r) {
            return findings::eval_to_json(evaluate(run, r).result);
          }),
      row("patch", "activation patching: which activation, at which position, carries the answer",
          {{"clean", &PatchRequest::clean},
           {"corrupt", &PatchRequest::corrupt},
           {"answer", &PatchRequest::answer},
           {"wrong", &PatchRequest::wrong}},
          patch_fields(),
          [](StudyRun& run, const PatchRequest& r) {
            return findings::patching_to_json(patch(run, r).result, false);
          }),
      row("lens", "logit lens and residual decomposition: where the answer appears, and who wrote it",
          {{"input", &LensRequest::input}, {"answer", &LensRequest::answer}, {"wrong", &LensRequest::wrong}},
          lens_fields(),
          [](StudyRun& run, const LensRequest& r) {
            return findings::lens_to_json(lens(run, r).result, false);
          }),
      row("scores", "every head's task, previous-token, first-token, induction and duplicate-token scores",
          {{"ids", &ScoresRequest::ids}}, scores_fields(),
          [](StudyRun& run, const ScoresRequest& r) {
            return findings::head_scores_to_json(scores(run, r).result);
          }),
      row("ablate",
          "head ablation: held-out accuracy and loss with each head zeroed, mean-ablated or resampled",
          {{"ids", &AblateRequest::ids}}, ablate_fields(),
          [](StudyRun& run, const AblateRequest& r) {
            return findings::mode_ablation_to_json(ablate(run, r).result);
          }),
      row("circuits", "the circuit read from the weights: composition, copying, positional QK, DLA",
          circuits_fields(),
          [](StudyRun& run, const CircuitsRequest& r) {
            return findings::circuits_to_json(circuits(run, r).result, false);
          }),
      row("fourier", "a modular-addition model in the Fourier basis: key frequencies, restricted loss, Gini",
          fourier_fields(),
          [](StudyRun& run, const FourierRequest& r) {
            return findings::fourier_to_json(fourier(run, r).result);
          }),
      row("gradcheck", "whole-model finite-difference gradient check in float64 of a config's architecture",
          gradcheck_fields(),
          [](const GradcheckRequest& r) { return findings::gradcheck_to_json(gradcheck(r).result); }),
      row("sae", "a sparse autoencoder trained on a run's activations at a hook point, and its evaluation",
          sae_fields(),
          [](StudyRun& run, const SaeRequest& r) {
            return findings::sae_eval_to_json(sae(run, r).result.eval);
          }),
      row("transcoder",
          "per-layer or cross-layer transcoders (MLP input to MLP outputs) trained on a run's activations, "
          "and their evaluation",
          transcoder_fields(),
          [](StudyRun& run, const TranscoderRequest& r) {
            return findings::transcoder_eval_to_json(transcoder(run, r).result.eval);
          }),
      row("graph",
          "the attribution graph of one prompt: exact direct effects between features, errors, tokens, "
          "logits",
          {{"input", &GraphRequest::input}, {"target", &GraphRequest::target}}, graph_fields(),
          [](StudyRun& run, const GraphRequest& r) {
            const auto out = graph(run, r);
            return findings::graph_to_json(out.result);
          }),
      row("sae_synthetic",
          "an SAE on synthetic sparse features with known directions: how well it recovers them",
          sae_synthetic_fields(),
          [](const SaeSyntheticRequest& r) {
            return findings::sae_synthetic_to_json(sae_synthetic(r).result);
          }),
      [] {
        Tool t =
            row("import", "a Hugging Face model folder (GPT-2, GPT-Neo, GPT-NeoX/Pythia, Llama) as a run",
                import_fields(),
                [](const ImportRequest& r) { return findings::import_to_json(import_model(r).result); });
        t.python_name = "import_model";  // import is Python's keyword
        return t;
      }(),
      row("tms", "a toy model of superposition: n features in m dims at one sparsity", tms_fields(),
          [](const TmsRequest& r) { return findings::tms_panel_to_json(tms(r).result.panels.front()); }),
      row("sweep", "train every point of a sweep's grid (or plan it for a scheduler); summarise the runs",
          sweep_fields(),
          [](const SweepRequest& r) { return json(findings::sweep_result_to_json(sweep(r).result)); }),
      row("sweep_collect", "a sweep's summary from its run folders: summary.json, summary.csv, index.html",
          sweep_collect_fields(),
          [](const SweepCollectRequest& r) {
            return json(findings::sweep_summary_to_json(sweep_collect(r.out).result));
          }),
  };
  return rows;
}

const Tool& tool(const std::string& name) {
  for (const Tool& t : tools())
    if (name == t.name) return t;
  throw RequestError(name + ": no such tool");
}

}  // namespace study
