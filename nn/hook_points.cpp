#include "nn/hook_points.h"

#include <cctype>

namespace nn {

std::string block_prefix(size_t layer) {
  return "blocks." + std::to_string(layer) + ".";
}

std::string hook_name(Point p, size_t layer) {
  const HookPoint& row = hook_point(p);
  return row.in_block ? block_prefix(layer) + row.name : std::string(row.name);
}

const HookPoint* find_hook_point(const std::string& name) {
  std::string rest = name;
  bool in_block = false;
  const std::string blocks = "blocks.";
  if (name.compare(0, blocks.size(), blocks) == 0) {
    // "blocks." digits "." rest
    size_t i = blocks.size();
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
    if (i == blocks.size() || i >= name.size() || name[i] != '.') return nullptr;
    rest = name.substr(i + 1);
    in_block = true;
  }
  for (const HookPoint& row : kHookPoints)
    if (row.in_block == in_block && rest == row.name) return &row;
  return nullptr;
}

std::vector<std::string> hook_point_names(const ModelShape& shape, bool on_request) {
  std::vector<std::string> names;
  auto listed = [&](const HookPoint& row) {
    return model_has(row, shape) && (on_request || row.needs != Needs::on_request);
  };
  // The points outside the blocks that stand before (or after) the blocks' rows in the table.
  auto outside = [&](bool after_blocks) {
    bool block_seen = false;
    for (const HookPoint& row : kHookPoints) {
      block_seen = block_seen || row.in_block;
      if (!row.in_block && block_seen == after_blocks && listed(row)) names.push_back(row.name);
    }
  };
  outside(false);
  for (size_t l = 0; l < static_cast<size_t>(shape.n_layers); ++l)
    for (const HookPoint& row : kHookPoints)
      if (row.in_block && listed(row)) names.push_back(hook_name(row.point, l));
  outside(true);
  return names;
}

std::string hook_point_summary(const ModelShape& shape) {
  std::string block, model;
  for (const HookPoint& row : kHookPoints) {
    if (!model_has(row, shape)) continue;
    std::string& list = row.in_block ? block : model;
    list += (list.empty() ? "" : ", ") + std::string(row.name);
  }
  return "blocks.0.." + std::to_string(shape.n_layers - 1) + ".{" + block + "}, " + model;
}

}  // namespace nn
