// Activation hooks: named points inside CausalLM's forward where a study can read an activation (capture)
// or replace it (patch), in the spirit of TransformerLens's hook points. A Hooks object is passed to
// forward as an argument and never stored on a module, so forward stays const, two studies of one model
// can run at once (each with its own Hooks), and the training path (no hooks) pays nothing.
//
// The hook points, their names, shapes and axes are declared once in nn/hook_points.h. A hook's replacement
// flows on through the rest of forward and, when gradients are on, through backward (to the replaced
// activation's unpatched elements and to the replacement itself). grad(point) keeps the gradient of a
// scalar with respect to the value at a point, from the backward of that scalar.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/hook_points.h"

namespace nn {

template <typename T>
class Hooks {
 public:
  // Sees the value at a point; returns what flows on (the value itself, or a tensor of the same shape).
  using Fn = std::function<ag::Tensor<T>(const ag::Tensor<T>& value)>;

  Hooks() = default;
  Hooks(const Hooks&) = delete;  // capture hooks hold a pointer to their Hooks
  Hooks& operator=(const Hooks&) = delete;

  // Runs fn at `point`, after the hooks added before it.
  //   hooks.add("blocks.0.attn.z", [](const ag::Tensor<float>& z) { return ag::scale(z, 0.5f); });
  void add(const std::string& point, Fn fn);
  // Keeps the value that flows on at `point` (after earlier hooks there); read it with captured(point).
  //   hooks.capture("blocks.1.attn.pattern"); model.forward(ids, B, T, {}, &hooks);
  void capture(const std::string& point);
  // Replaces the whole value at `point` with `value` (the point's full shape).
  void patch(const std::string& point, const ag::Tensor<T>& value);
  // Replaces the elements at the given positions (empty: every position) with those of `source`, which has
  // the point's full shape or that shape without the batch dim (then the same for every batch entry).
  //   hooks.patch_positions("blocks.0.resid_pre", {3}, clean_resid);
  void patch_positions(const std::string& point, const std::vector<int64_t>& positions,
                       const ag::Tensor<T>& source);
  // As patch_positions, for one head of a point with a head axis (attn.q, .k, .v, .scores, .pattern, .z;
  // query positions for scores and pattern).
  //   hooks.patch_head("blocks.1.attn.z", 2, {}, ag::Tensor<float>::zeros({T, H, dk}));  // zero ablation
  void patch_head(const std::string& point, int64_t head, const std::vector<int64_t>& positions,
                  const ag::Tensor<T>& source);

  // Splices `fn` in for the computation whose output is `point`: that computation is not run, fn(its input)
  // is its output, and the hooks at `point` run after it. Three points have one to splice:
  // "blocks.L.mlp.out" (the MLP; its input is ln2's output, or the stream it reads without norms; mlp.pre,
  // .gate and .post are then not reached), "blocks.L.attn.pattern" (from attention's input: q, k and the
  // scores are then not computed) and "logits" (the unembedding and the softcap; the input is the final
  // norm's output). circuit-tracer's local replacement model splices transcoders in for the MLPs and
  // freezes the patterns this way (attribution/graph.cpp); a second splice at one point replaces the first.
  //   hooks.splice("blocks.0.mlp.out", [&](const ag::Tensor<double>& x) { return transcoder(x); });
  void splice(const std::string& point, Fn fn);
  // The function spliced in at `point`, or null.
  const Fn* spliced(const std::string& point) const;

  // Keeps d(scalar) / d(value at `point`) for the backward of any scalar computed from the next forward;
  // read it with gradient(point). The value flows on as value + probe, where probe is a zero tensor of the
  // value's shape that requires grad: x + 0 is x, so no value changes, and backward leaves in the probe
  // exactly the gradient at the point (interior nodes drop theirs). Probes at several points give each
  // point's total derivative (the graph between them is kept). Parameter gradients come from the same
  // backward when the parameters require grad (as after construction); inside an nn::NoParameterGrads
  // scope (nn/module.h) the forward records only what lies downstream of the probes and backward computes
  // no parameter gradient at all. The forward must record a graph: in an ag::NoGradScope the hook throws
  // std::logic_error naming the point.
  //   hooks.grad("blocks.0.resid_pre"); metric(model.forward(ids, 1, T, {}, &hooks)).backward();
  //   const ag::Tensor<double> g = hooks.gradient("blocks.0.resid_pre");  // (1, T, D)
  void grad(const std::string& point);
  // The gradient kept by grad(point) (zeros before a backward reached it); throws std::out_of_range
  // naming the point when grad(point) was not asked for or no forward ran since.
  ag::Tensor<T> gradient(const std::string& point) const;

  // True when some hook (or splice) is registered at `point`.
  bool has(const std::string& point) const { return fns_.count(point) > 0 || splices_.count(point) > 0; }
  bool empty() const { return fns_.empty() && splices_.empty(); }
  // Every point some hook is registered at.
  std::vector<std::string> points() const;
  // The value captured at `point` by the last forward; throws std::out_of_range naming the point when none.
  const ag::Tensor<T>& captured(const std::string& point) const;
  // Drops every hook and captured value.
  void clear();

  // Called by the modules: the value after every hook at `point`, in the order they were added.
  ag::Tensor<T> run(const std::string& point, const ag::Tensor<T>& value);

 private:
  std::map<std::string, std::vector<Fn>> fns_;
  std::map<std::string, Fn> splices_;
  std::map<std::string, ag::Tensor<T>> captured_;
  std::map<std::string, ag::Tensor<T>> probes_;  // grad(point)'s zero leaves, by point
};

// What a module's reference forward calls at each hook point: at(Point::attn_z, z) is z after every hook at
// the point's full name (`prefix` + the table's name for a block's point, "blocks.L."), or z itself when
// there are no hooks (then no name is built).
template <typename T>
class HookSite {
 public:
  HookSite() = default;
  HookSite(Hooks<T>* hooks, std::string prefix = "") : hooks_(hooks), prefix_(std::move(prefix)) {}
  ag::Tensor<T> operator()(Point p, const ag::Tensor<T>& value) const {
    if (!hooks_) return value;
    return hooks_->run(name(p), value);
  }
  // Whether some hook is registered at the point: a point computed only on request (Needs::on_request)
  // is computed when this holds.
  bool wants(Point p) const { return hooks_ && hooks_->has(name(p)); }
  // The function spliced in for the module whose output is `p` (Hooks::splice), or null.
  const typename Hooks<T>::Fn* spliced(Point p) const { return hooks_ ? hooks_->spliced(name(p)) : nullptr; }

 private:
  std::string name(Point p) const {
    const HookPoint& row = hook_point(p);
    return row.in_block ? prefix_ + row.name : std::string(row.name);
  }

  Hooks<T>* hooks_ = nullptr;
  std::string prefix_;
};

}  // namespace nn
