#include "autograd/threads.h"

#include <omp.h>

#include <Eigen/Core>

namespace ag {

void set_num_threads(int n) {
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}

int num_threads() {
  return Eigen::nbThreads();
}

}  // namespace ag
