// Opens a trained run folder (config and last checkpoint), runs one held-out sequence through the model
// with an activation hook on one layer's attention pattern, and prints one head's pattern and the model's
// top prediction at every position.
//   read_run RUN_DIR [LAYER [HEAD]]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "attograd/autograd/ops.h"
#include "attograd/nn/hooks.h"
#include "attograd/train/run_folder.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: read_run RUN_DIR [LAYER [HEAD]]\n");
    return 2;
  }
  try {
    const train::LoadedRun run = train::load_run(argv[1]);
    const nn::ModelShape& shape = run.model->shape;
    const int64_t layer = argc > 2 ? std::atoll(argv[2]) : shape.n_layers - 1;
    const int64_t head = argc > 3 ? std::atoll(argv[3]) : 0;
    if (layer < 0 || layer >= shape.n_layers || head < 0 || head >= shape.n_heads) {
      std::fprintf(stderr, "read_run: LAYER must be in [0, %lld) and HEAD in [0, %lld)\n",
                   static_cast<long long>(shape.n_layers), static_cast<long long>(shape.n_heads));
      return 2;
    }
    const train::Batch batch = run.task->eval_set(run.config.seed, 1);  // one held-out sequence
    const int64_t T = batch.T;

    ag::NoGradScope no_grad;
    nn::Hooks<float> hooks;
    const std::string point = nn::hook_name(nn::Point::attn_pattern, layer);
    hooks.capture(point);
    const ag::Tensor<float> probs = ag::softmax(run.model->forward(batch.inputs, 1, T, {}, &hooks));
    const ag::Tensor<float>& pattern = hooks.captured(point);  // (1, H, T, T)

    std::printf("run %s at step %lld, task %s\n", run.dir.c_str(), static_cast<long long>(run.step),
                run.config.task.kind.c_str());
    std::printf("%s, head %lld (row: query position, column: key position)\n", point.c_str(),
                static_cast<long long>(head));
    for (int64_t t = 0; t < T; ++t) {
      std::printf("row %2lld %5s |", static_cast<long long>(t),
                  run.task->token_name(batch.inputs[t]).c_str());
      for (int64_t s = 0; s < T; ++s) std::printf(" %.4f", pattern.data()[(head * T + t) * T + s]);
      std::printf("\n");
    }
    std::printf("top predictions (position: input -> predicted next token, probability; target):\n");
    const int64_t V = probs.size(-1);
    for (int64_t t = 0; t < T; ++t) {
      const float* p = probs.data() + t * V;
      int64_t best = 0;
      for (int64_t v = 1; v < V; ++v)
        if (p[v] > p[best]) best = v;
      const int32_t target = batch.targets[t];
      std::printf("%2lld: %5s -> %5s  %.3f  %s\n", static_cast<long long>(t),
                  run.task->token_name(batch.inputs[t]).c_str(), run.task->token_name(int(best)).c_str(),
                  p[best], target < 0 ? "" : run.task->token_name(target).c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "read_run: %s\n", e.what());  // a missing or corrupt run folder names its file
    return 2;
  }
}
