#include "study/tools.h"

#include <type_traits>
#include <utility>
#include <variant>

#include "io/field_table.h"
#include "io/printable.h"
#include "study/bench.h"
#include "study/evaluation.h"
#include "study/lens.h"
#include "study/lesson.h"
#include "study/patching.h"
#include "study/sweep.h"

namespace study {

namespace {

using nlohmann::json;

// A request's inputs beyond its table: sequences (a JSON string is token names, an array of integers raw
// ids) and tokens (a string is a name, an integer an id), in the order a caller gives them.
template <typename Request>
using Inputs = std::vector<std::pair<const char*, std::variant<Sequence Request::*, Token Request::*>>>;

// A sequence: a string of token names or an array of ids, not empty.
void read_sequence(const io::Section& root, const char* key, const json& value, Sequence& s) {
  if (value.is_string()) {
    root.read(key, s.tokens);
  } else if (value.is_array()) {
    root.read(key, s.ids);
  } else {
    io::field_fail(root.pointer(key), "expected token names (a string) or ids (an array of integers), got " +
                                          io::describe(value));
  }
  if (s.empty()) io::field_fail(root.pointer(key), "expected token names or ids, got none");
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

// The request of `tool` from its JSON: the table's fields and the sequences, every other key an error.
// Errors are RequestError "FIELD: what was expected", as the tools' own checks say them.
template <typename Request>
Request read_request(const json& document, const std::string& tool, const io::Table<Request>& fields,
                     const Inputs<Request>& inputs) {
  Request request;
  try {
    const io::Section root(document, "");
    std::vector<std::string> input_keys;
    for (const auto& [key, member] : inputs) {
      input_keys.push_back(key);
      if (!root.has(key)) continue;
      const json& value = document.at(key);
      if (const auto* sequence = std::get_if<Sequence Request::*>(&member)) {
        read_sequence(root, key, value, request.**sequence);
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
template <typename Request, typename Run>
Tool row(const char* name, const char* summary, const Inputs<Request>& inputs,
         const io::Table<Request>& fields, Run run) {
  Tool tool;
  tool.name = name;
  tool.summary = summary;
  for (const auto& input : inputs) tool.fields.push_back(input.first);
  for (const io::Field<Request>& field : fields) tool.fields.push_back(field.key);
  tool.reads_run = std::is_invocable_v<Run, StudyRun&, const Request&>;
  tool.call = [name = tool.name, fields, inputs, run](StudyRun* open, const json& j) -> json {
    const Request request = read_request(j, name, fields, inputs);
    if constexpr (std::is_invocable_v<Run, StudyRun&, const Request&>) {
      return run(*open, request);
    } else {
      return run(request);
    }
  };
  return tool;
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

}  // namespace

const std::vector<Tool>& tools() {
  static const std::vector<Tool> rows = {
      row("demo", "the seed lesson's walkthrough: self-attention from scratch", {}, lesson_fields(),
          [](const LessonRequest& r) { return findings::lesson_to_json(lesson(r).result); }),
      row("bench", "time training steps (or forward passes) of a config's model", {}, bench_fields(),
          [](const BenchRequest& r) { return findings::bench_to_json(bench(r).result); }),
      row("eval", "held-out accuracy and loss of a run's last checkpoint", {}, eval_fields(),
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
      row("sweep", "train every point of a sweep's grid (or plan it for a scheduler); summarise the runs", {},
          sweep_fields(),
          [](const SweepRequest& r) { return json(findings::sweep_result_to_json(sweep(r).result)); }),
      row("sweep_collect", "a sweep's summary from its run folders: summary.json, summary.csv, index.html",
          {}, sweep_collect_fields(),
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
