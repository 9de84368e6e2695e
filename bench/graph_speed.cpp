// How long `attograd graph` takes to build one attribution graph, timed in one process (the run and its
// transcoders loaded once): attribution::graph without saving (the local replacement model, the adjacency
// matrix, pruning and scores, the kept links' head loadings), `rounds` times; prints the median and the
// fastest. The budget is 1 s on 2 cores for configs/induction.json's model (docs/graphs.md).
//   build/graph_speed RUN_DIR "TOKENS" [rounds]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "attribution/graph.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: graph_speed RUN_DIR \"TOKENS\" [rounds]\n");
    return 2;
  }
  try {
    analysis::StudyRun run = analysis::open_run(argv[1]);
    attribution::GraphRequest request;
    request.input.tokens = argv[2];
    request.save = "";  // time the graph, not the files
    const int rounds = argc > 3 ? std::stoi(argv[3]) : 11;
    std::vector<double> seconds;
    size_t nodes = 0, links = 0;
    for (int i = 0; i < rounds; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto out = attribution::graph(run, request);
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      nodes = out.result.nodes.size();
      links = out.result.links.size();
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("graph of %zu nodes (%zu kept links): median %.4f s, fastest %.4f s over %d rounds\n", nodes,
                links, seconds[seconds.size() / 2], seconds.front(), rounds);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "graph_speed: %s\n", e.what());
    return 2;
  }
}
