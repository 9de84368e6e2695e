// The engine's worker threads: one OpenMP pool, used by Eigen's GEMMs and by the ops' parallel loops.
// Results are deterministic for a fixed thread count (each output element is computed by one thread).
#pragma once

namespace ag {

void set_num_threads(int n);
int num_threads();

}  // namespace ag
