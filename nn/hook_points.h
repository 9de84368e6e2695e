// The hook points of CausalLM, each declared once: the table below is the only place a point's name,
// shape, meaning and axes are written. hook_points(), the axes that Hooks::patch_positions and
// Hooks::patch_head act on, the error for an unknown point and docs/architecture.md's "Hook points" table
// (tests/nn/test_hooks.cpp compares the two) all follow from it.
//
// How to add a hook point:
//   1. Add its enumerator to Point and its row to kHookPoints, both in forward order (a static_assert below
//      checks that the two agree).
//   2. Call `at(Point::name, value)` where the value is made in the reference forward
//      (nn/transformer.cpp, nn/attention.cpp, nn/layers.cpp): what `at` returns flows on.
//   3. Add its row to docs/architecture.md's table; test_hooks.cpp captures, patches and gradient-checks
//      every point of the table already.
// The training forward (nn/training_forward.cpp) has no hook points and needs no change.
//
// Dimension letters: B batch, T query positions, S key positions (S = T), H heads, Hkv key and value heads
// (model.n_kv_heads, H unless the model has grouped-query attention), dk = D / H, F = d_ff, V vocabulary. L
// is the block index from 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/model_shape.h"

namespace nn {

enum class Point {
  embed,
  pos_embed,
  resid_pre,
  ln1_scale,
  ln1_out,
  attn_q,
  attn_k,
  attn_v,
  attn_scores,
  attn_pattern,
  attn_z,
  attn_result,
  attn_out,
  resid_mid,
  ln2_scale,
  ln2_out,
  mlp_pre,
  mlp_gate,
  mlp_post,
  mlp_out,
  resid_post,
  ln_f_scale,
  ln_f_out,
  logits,
};

// Which models have the point.
enum class Needs {
  always,
  mlp,         // blocks with an MLP (not attention_only)
  norm,        // models with a norm (model.norm not none: has_norm)
  mlp_norm,    // both
  learned,     // models with learned positions (model.positions "learned")
  on_request,  // every model, computed only when a hook is registered at it; not in hook_point_names()
  gated,       // blocks with a gated MLP (model.activation swiglu or geglu: mlp_gated)
};

struct HookPoint {
  Point point;
  // "blocks.L." + name for a point of block L (in_block), else the whole name.
  const char* name;
  bool in_block;
  Needs needs;
  const char* shape;  // in the dimension letters above
  // Where the position axis (query position for scores and pattern) and the head axis are; -1: none.
  int position_axis;
  int head_axis;
  const char* meaning;
};

inline constexpr HookPoint kHookPoints[] = {
    {Point::embed, "embed", false, Needs::always, "(B, T, D)", 1, -1, "the token embedding of each position"},
    {Point::pos_embed, "pos_embed", false, Needs::learned, "(B, T, D)", 1, -1,
     "the position embedding of each position (the same for every batch entry); embed + pos_embed is "
     "blocks.0.resid_pre"},
    {Point::resid_pre, "resid_pre", true, Needs::always, "(B, T, D)", 1, -1,
     "the residual stream entering block L"},
    {Point::ln1_scale, "ln1.scale", true, Needs::norm, "(B, T, 1)", 1, -1,
     "1 / sqrt(var + eps), the factor ln1 multiplies the centred residual by (RMSNorm: 1 / sqrt(mean(x^2) + "
     "eps), the residual itself)"},
    {Point::ln1_out, "ln1.out", true, Needs::norm, "(B, T, D)", 1, -1, "ln1's output, attention's input"},
    {Point::attn_q, "attn.q", true, Needs::always, "(B, T, H, dk)", 1, 2,
     "each head's queries (after QK-norm and the rotation, where the model has them)"},
    {Point::attn_k, "attn.k", true, Needs::always, "(B, T, Hkv, dk)", 1, 2,
     "each kv head's keys (after QK-norm and the rotation, where the model has them); query head h reads kv "
     "head h / (H / Hkv)"},
    {Point::attn_v, "attn.v", true, Needs::always, "(B, T, Hkv, dk)", 1, 2, "each kv head's values"},
    {Point::attn_scores, "attn.scores", true, Needs::always, "(B, H, T, S)", 2, 1,
     "q k^T / sqrt(dk) (q k^T with model.attn_scale none), before the mask and the softmax: the masked "
     "entries (keys after the query, or before its model.attn_window) hold the raw score too, and the "
     "pattern is 0 there whatever they hold"},
    {Point::attn_pattern, "attn.pattern", true, Needs::always, "(B, H, T, S)", 2, 1,
     "attention weights: each row sums to 1 over the keys it may see"},
    {Point::attn_z, "attn.z", true, Needs::always, "(B, T, H, dk)", 1, 2, "each head's output before Wo"},
    {Point::attn_result, "attn.result", true, Needs::on_request, "(B, T, H, D)", 1, 2,
     "what each head writes into the stream, z_h Wo_h^T; attn.out is its sum over heads plus Wo's bias "
     "(recomputed from it when a hook replaces it)"},
    {Point::attn_out, "attn.out", true, Needs::always, "(B, T, D)", 1, -1, "attention's output after Wo"},
    {Point::resid_mid, "resid_mid", true, Needs::always, "(B, T, D)", 1, -1, "resid_pre + attn.out"},
    {Point::ln2_scale, "ln2.scale", true, Needs::mlp_norm, "(B, T, 1)", 1, -1,
     "1 / sqrt(var + eps), the factor ln2 multiplies the centred residual by (RMSNorm: 1 / sqrt(mean(x^2) + "
     "eps), the residual itself)"},
    {Point::ln2_out, "ln2.out", true, Needs::mlp_norm, "(B, T, D)", 1, -1, "ln2's output, the MLP's input"},
    {Point::mlp_pre, "mlp.pre", true, Needs::mlp, "(B, T, F)", 1, -1,
     "fc1's output, before the activation (gated: the up projection the gate multiplies)"},
    {Point::mlp_gate, "mlp.gate", true, Needs::gated, "(B, T, F)", 1, -1,
     "the gate's output gate(x), before its activation (silu or gelu)"},
    {Point::mlp_post, "mlp.post", true, Needs::mlp, "(B, T, F)", 1, -1,
     "the activation's output, fc2's input (gated: act(mlp.gate) * mlp.pre)"},
    {Point::mlp_out, "mlp.out", true, Needs::mlp, "(B, T, D)", 1, -1, "the MLP's output"},
    {Point::resid_post, "resid_post", true, Needs::always, "(B, T, D)", 1, -1,
     "the residual stream leaving block L: resid_mid + mlp.out (resid_mid without an MLP)"},
    {Point::ln_f_scale, "ln_f.scale", false, Needs::norm, "(B, T, 1)", 1, -1,
     "1 / sqrt(var + eps), the factor ln_f multiplies the centred residual by (RMSNorm: 1 / sqrt(mean(x^2) + "
     "eps), the residual itself)"},
    {Point::ln_f_out, "ln_f.out", false, Needs::norm, "(B, T, D)", 1, -1,
     "ln_f's output, the unembedding's input"},
    {Point::logits, "logits", false, Needs::always, "(B, T, V)", 1, -1, "the model's output"},
};

namespace detail {
constexpr bool rows_follow_the_enum() {
  for (size_t i = 0; i < sizeof(kHookPoints) / sizeof(kHookPoints[0]); ++i)
    if (static_cast<size_t>(kHookPoints[i].point) != i) return false;
  return static_cast<size_t>(Point::logits) + 1 == sizeof(kHookPoints) / sizeof(kHookPoints[0]);
}
}  // namespace detail
static_assert(detail::rows_follow_the_enum(), "kHookPoints: one row per Point, in the enum's order");

inline const HookPoint& hook_point(Point p) {
  return kHookPoints[static_cast<size_t>(p)];
}

// "blocks.L." for block L.
std::string block_prefix(size_t layer);
// The full name of a point: hook_name(Point::attn_z, 1) is "blocks.1.attn.z", hook_name(Point::logits)
// "logits" (the layer is ignored for points outside the blocks).
std::string hook_name(Point p, size_t layer = 0);

// The table row of a full name ("blocks.3.attn.z" -> attn_z's row), or nullptr when the name has no row.
const HookPoint* find_hook_point(const std::string& name);

// What docs/architecture.md's table adds to a point's meaning: "" or " (not in ...)".
inline const char* needs_note(Needs needs) {
  switch (needs) {
    case Needs::mlp:
      return " (not in attention-only models)";
    case Needs::norm:
      return " (not in models without a norm)";
    case Needs::mlp_norm:
      return " (not in attention-only models or models without a norm)";
    case Needs::on_request:
      return " (computed only when a hook asks for it; not in hook_points())";
    case Needs::learned:
      return " (not in models without learned positions)";
    case Needs::gated:
      return " (only in gated MLPs: model.activation swiglu or geglu)";
    default:
      return "";
  }
}

// Whether a model of this shape has the point.
inline bool model_has(const HookPoint& row, const ModelShape& shape) {
  const bool mlp = !shape.attention_only;
  switch (row.needs) {
    case Needs::mlp:
      return mlp;
    case Needs::norm:
      return has_norm(shape.norm);
    case Needs::mlp_norm:
      return mlp && has_norm(shape.norm);
    case Needs::learned:
      return shape.positions == PositionKind::learned;
    case Needs::gated:
      return mlp && mlp_gated(shape.activation);
    default:
      return true;
  }
}

// Every point of a model of this shape (shape.n_layers blocks), in forward order; the points computed only
// on request (Needs::on_request) with `on_request` only.
std::vector<std::string> hook_point_names(const ModelShape& shape, bool on_request = false);
// The same points in one line, "blocks.0..N-1.{resid_pre, ...}, ln_f.scale, ..., logits", for an error.
std::string hook_point_summary(const ModelShape& shape);

}  // namespace nn
