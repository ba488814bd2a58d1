#include "probe/host_measure.h"

#include <algorithm>
#include <vector>

#include "core/units.h"
#include "graph/builder.h"
#include "runtime/executor.h"

namespace lj {
namespace {

// Best seconds of `reps` runs of a one-op graph.
StatusOr<double> best_seconds(const Graph& g, Device& dev, const std::vector<Tensor>& in,
                              int reps) {
  Executor ex(g, dev);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    LJ_ASSIGN_OR_RETURN(std::vector<Tensor> out, ex.run(in));
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

}  // namespace

StatusOr<HostMeasurement> measure_host(int threads) {
  Device dev(threads);
  HostMeasurement m;
  m.threads = dev.threads();
  {
    const int64_t n = 768;
    Graph g;
    Builder b(&g);
    Val x = b.input("a", DType::f32, Shape{n, n});
    Val y = b.input("b", DType::f32, Shape{n, n});
    b.output("c", matmul(x, y));
    LJ_RETURN_IF_ERROR(b.status());
    std::vector<Tensor> in{Tensor::zeros(dev, DType::f32, {n, n}, MemCategory::temporaries),
                           Tensor::zeros(dev, DType::f32, {n, n}, MemCategory::temporaries)};
    LJ_ASSIGN_OR_RETURN(double s, best_seconds(g, dev, in, 6));
    m.gemm_flops = 2.0 * static_cast<double>(n * n * n) / s;
  }
  {
    const int64_t n = 16 * 1024 * 1024;  // 64 MiB per array
    Graph g;
    Builder b(&g);
    Val x = b.input("a", DType::f32, Shape{n});
    Val y = b.input("b", DType::f32, Shape{n});
    b.output("c", x + y);
    LJ_RETURN_IF_ERROR(b.status());
    std::vector<Tensor> in{Tensor::zeros(dev, DType::f32, {n}, MemCategory::temporaries),
                           Tensor::zeros(dev, DType::f32, {n}, MemCategory::temporaries)};
    LJ_ASSIGN_OR_RETURN(double s, best_seconds(g, dev, in, 5));
    m.mem_bandwidth = 3.0 * 4.0 * static_cast<double>(n) / s;  // two reads, one write
  }
  return m;
}

}  // namespace lj
