// XOR with a two-layer MLP: Tensor, ops, nn::Linear and AdamW from an installed attograd.
#include <cstdio>

#include "attograd/autograd/ops.h"
#include "attograd/nn/layers.h"
#include "attograd/train/optimizer.h"

struct MLP : nn::Module<float> {
  ag::Rng rng{42};
  nn::Linear<float> fc1{2, 8, rng}, fc2{8, 2, rng};
  MLP() {
    register_module("fc1", &fc1);
    register_module("fc2", &fc2);
  }
  ag::Tensor<float> forward(const ag::Tensor<float>& x) const {
    return fc2.forward(ag::tanh(fc1.forward(x)));
  }
};

int main() {
  // The four inputs and their class (x1 xor x2).
  const auto x = ag::Tensor<float>::from({4, 2}, {0, 0, 0, 1, 1, 0, 1, 1});
  const std::vector<int32_t> y = {0, 1, 1, 0};

  MLP model;
  std::vector<train::OptimParam> params;
  for (const auto& p : model.named_parameters()) params.push_back({p.name, p.tensor, false});
  train::AdamW optimizer(params, /*weight_decay=*/0.0);

  float loss = 0;
  for (int step = 0; step < 500; ++step) {
    model.zero_grad();
    ag::Tensor<float> l = ag::cross_entropy(model.forward(x), y);
    l.backward();
    optimizer.step(/*lr=*/0.05);
    loss = l.item();
    if (step % 50 == 0) std::printf("step %3d  loss %.6f\n", step, loss);
  }
  std::printf("final loss %.6f\n", loss);
  const ag::Tensor<float> logits = model.forward(x);
  for (int i = 0; i < 4; ++i)
    std::printf("%g xor %g -> %d\n", x.data()[2 * i], x.data()[2 * i + 1],
                logits.data()[2 * i + 1] > logits.data()[2 * i] ? 1 : 0);
}
