// Module: the base of every nn/ building block. It keeps its parameters and children by name so the
// optimiser, the checkpoint writer and the gradient checker can walk them with the checkpoint's names
// ("blocks.0.attn.wq.weight", docs/architecture.md "Checkpoint"). Modules are templates on the scalar type:
// float to train, double to check.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace nn {

// What a parameter is, declared where it is registered: the optimiser chooses weight decay by it
// (train/optimizer.h), never by the parameter's name.
enum class ParamKind {
  kWeight,     // a weight matrix that multiplies its input (Linear, attention)
  kBias,       // an additive bias
  kEmbedding,  // a row table read by index (tok_emb, pos_emb)
  kNorm,       // a norm's weight or bias (nn::Norm)
};

template <typename T>
class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;  // parameters are registered by address: a copy would dangle
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  struct NamedParameter {
    std::string name;
    ag::Tensor<T>* tensor;
    ParamKind kind;
  };
  // Every parameter of this module and its children, in registration order, names joined with '.'.
  std::vector<NamedParameter> named_parameters(const std::string& prefix = "") const {
    std::vector<NamedParameter> out;
    collect(prefix, out);
    return out;
  }
  int64_t parameter_count() const {
    int64_t n = 0;
    for (const auto& p : named_parameters()) n += p.tensor->numel();
    return n;
  }
  void zero_grad() {
    for (auto& p : named_parameters()) p.tensor->zero_grad();
  }

 protected:
  ag::Tensor<T>& register_parameter(const std::string& name, ag::Tensor<T> tensor, ParamKind kind) {
    tensor.set_requires_grad(true);
    parameters_.push_back({name, std::make_unique<ag::Tensor<T>>(std::move(tensor)), kind});
    return *parameters_.back().tensor;
  }
  void register_module(const std::string& name, Module* child) { children_.push_back({name, child}); }

 private:
  void collect(const std::string& prefix, std::vector<NamedParameter>& out) const {
    const std::string p = prefix.empty() ? "" : prefix + ".";
    for (const auto& [name, tensor, kind] : parameters_) out.push_back({p + name, tensor.get(), kind});
    for (const auto& [name, child] : children_) child->collect(p + name, out);
  }

  struct Parameter {
    std::string name;
    std::unique_ptr<ag::Tensor<T>> tensor;
    ParamKind kind;
  };
  std::vector<Parameter> parameters_;
  std::vector<std::pair<std::string, Module*>> children_;
};

// While alive, none of the module's parameters requires grad (each gets its own setting back at the end):
// a forward records a graph only downstream of other tensors that require grad (Hooks::grad's probes), and
// a backward computes activation gradients without any parameter gradient, and leaves the parameters'
// gradient buffers as they were. The flag is on the shared parameters: no training step of the same
// model may run meanwhile.
template <typename T>
class NoParameterGrads {
 public:
  explicit NoParameterGrads(const Module<T>& module) : parameters_(module.named_parameters()) {
    for (const auto& p : parameters_) {
      was_.push_back(p.tensor->requires_grad());
      p.tensor->set_requires_grad(false);
    }
  }
  ~NoParameterGrads() {
    for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].tensor->set_requires_grad(was_[i]);
  }
  NoParameterGrads(const NoParameterGrads&) = delete;
  NoParameterGrads& operator=(const NoParameterGrads&) = delete;

 private:
  std::vector<typename Module<T>::NamedParameter> parameters_;
  std::vector<bool> was_;
};

}  // namespace nn
