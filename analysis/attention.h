// attograd forward, attend and compare as library calls: one input through the model (logits, predictions
// and every head's map), where the chosen heads look on one input (and its SVG picture), and the chosen
// heads' maps on two inputs of the same length side by side (and their SVG picture). The command line and
// the Python module both call these.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "findings/attention_view.h"

namespace analysis {

struct ForwardRequest {
  Sequence input;  // token names or ids, both taken exactly as given (no BOS put in front)
};

Output<findings::ForwardResult> forward(StudyRun& run, const ForwardRequest& request);

struct AttendRequest {
  Sequence input;            // token names get BOS put in front when missing; ids are taken as given
  std::optional<int> layer;  // only this layer's heads; none = every layer
  std::optional<int> head;   // only this head of each layer; none = every head
  std::string svg;           // "" = write nothing; a file path the user names for the SVG picture
};

Output<findings::AttendResult> attend(StudyRun& run, const AttendRequest& request);

struct CompareRequest {
  Sequence a, b;  // the same length (after BOS is put in front); token names get BOS when missing
  std::optional<int> layer;
  std::optional<int> head;
  std::string svg;  // "" = write nothing; a file path for A, B and A - B per head as an SVG picture
};

Output<findings::CompareResult> compare(StudyRun& run, const CompareRequest& request);

// The SVG pictures, written to the path the user names (io::write_user_file: a symbolic link there is
// followed and never replaced; a folder, device or FIFO is refused). Return the paths written.
std::vector<std::string> save_attend(const StudyRun& run, const std::string& path,
                                     const findings::AttendResult& r);
std::vector<std::string> save_compare(const StudyRun& run, const std::string& path,
                                      const findings::CompareResult& r);

}  // namespace analysis
