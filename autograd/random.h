// The one random generator of attograd: parameter init, data, dropout-free sampling, probes.
// xoshiro256** seeded through splitmix64, with our own uniform and normal samplers, so that the same seed
// gives the same numbers on every compiler and standard library (std::normal_distribution does not).
// Its whole state is four words, which checkpoints save to resume bit-exactly.
#pragma once

#include <array>
#include <cstdint>

namespace ag {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);

  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Uniform integer in [0, n), unbiased (rejection sampling); n must be > 0.
  uint64_t below(uint64_t n);
  // Standard normal by the Box-Muller transform; the second value of each pair is kept for the next call.
  double normal();
  double normal(double mean, double std) { return mean + std * normal(); }

  // The full state, for checkpoints: four xoshiro words, the cached normal and whether it is valid.
  struct State {
    std::array<uint64_t, 4> s;
    double cached_normal;
    bool has_cached_normal;
  };
  State state() const { return {s_, cached_normal_, has_cached_normal_}; }
  void set_state(const State& st);

 private:
  std::array<uint64_t, 4> s_{};
  double cached_normal_ = 0.0;
  bool has_cached_normal_ = false;
};

}  // namespace ag
