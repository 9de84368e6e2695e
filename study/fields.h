// The request tables (io/field_table.h: key, member, meaning, what it accepts) of the tools with a
// hand-written command, declared for it: the command builds its typed options from the table
// (cli/table_options.h) as the Python module binds the same rows through study::tools(), so neither restates
// a field. Defined in study/tools.cpp, next to each tool's row. A tool without a hand-written command needs
// no line here: its subcommand is made from its row (cli/tool_command.cpp).
#pragma once

#include <string>

#include "analysis/ablation.h"
#include "analysis/attention.h"
#include "analysis/circuits.h"
#include "analysis/detect.h"
#include "analysis/evaluation.h"
#include "analysis/fourier.h"
#include "analysis/generate.h"
#include "analysis/gradcheck.h"
#include "analysis/lens.h"
#include "analysis/lesson.h"
#include "analysis/patching.h"
#include "attribution/graph.h"
#include "dictionary/sae_tool.h"
#include "dictionary/tms.h"
#include "dictionary/transcoder.h"
#include "imports/import_model.h"
#include "io/field_table.h"
#include "runner/bench.h"
#include "runner/sweep.h"

namespace study {

// sweep_collect's request: the sweep's out folder.
struct SweepCollectRequest {
  std::string out;
};

const io::Table<analysis::LessonRequest>& lesson_fields();
const io::Table<runner::BenchRequest>& bench_fields();
const io::Table<analysis::ForwardRequest>& forward_fields();
const io::Table<analysis::GenerateRequest>& generate_fields();
const io::Table<analysis::AttendRequest>& attend_fields();
const io::Table<analysis::CompareRequest>& compare_fields();
const io::Table<analysis::DetectRequest>& detect_fields();
const io::Table<analysis::EvalRequest>& eval_fields();
const io::Table<analysis::PatchRequest>& patch_fields();
const io::Table<analysis::LensRequest>& lens_fields();
const io::Table<analysis::AblateRequest>& ablate_fields();
const io::Table<analysis::CircuitsRequest>& circuits_fields();
const io::Table<analysis::FourierRequest>& fourier_fields();
const io::Table<analysis::GradcheckRequest>& gradcheck_fields();
const io::Table<dictionary::SaeRequest>& sae_fields();
const io::Table<dictionary::TranscoderRequest>& transcoder_fields();
const io::Table<attribution::GraphRequest>& graph_fields();
const io::Table<dictionary::SaeSyntheticRequest>& sae_synthetic_fields();
const io::Table<imports::ImportRequest>& import_fields();
const io::Table<dictionary::TmsRequest>& tms_fields();
const io::Table<runner::SweepRequest>& sweep_fields();
const io::Table<SweepCollectRequest>& sweep_collect_fields();

}  // namespace study
