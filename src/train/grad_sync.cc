#include "train/grad_sync.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/units.h"

namespace lj {

GradSync::GradSync(const Graph& g, Executor& ex, Communicator& comm, const FlatLayout& layout)
    : comm_(comm), layout_(layout) {
  LJ_CHECK_EQ(layout.world_size(), comm.world_size());
  // Sized first: the kernels hold pointers into buckets_.
  size_t num_buckets = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == Op::grad_reduce_start) ++num_buckets;
  }
  buckets_.resize(num_buckets);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == Op::param_gather_start || n.op == Op::param_gather_wait) {
      const ValueId buffer = n.op == Op::param_gather_start ? n.outputs[0] : n.inputs[0];
      Gather& a = gathers_[buffer];
      const int64_t fb = n.attrs.i("flat_begin"), fe = n.attrs.i("flat_end");
      LJ_CHECK_EQ(fb, layout.param_begin(static_cast<size_t>(n.attrs.i("param"))));
      a.counts.clear();
      for (int r = 0; r < comm.world_size(); ++r) {
        const FlatRange s = layout.shard(r);
        a.counts.push_back(std::max<int64_t>(0, std::min(fe, s.end) - std::max(fb, s.begin)));
      }
      const FlatRange mine = layout.shard(comm.rank());
      a.send_begin = std::max(fb, mine.begin) - mine.begin;
      Gather* ap = &a;
      if (n.op == Op::param_gather_start) {
        ex.set_node_kernel(i, [this, ap](KernelContext& c) { return start_gather(*ap, c); });
      } else {
        ex.set_node_kernel(i, [this, ap](KernelContext& c) { return wait_gather(*ap, c); });
      }
      continue;
    }
    if (n.op != Op::grad_reduce_start && n.op != Op::grad_reduce_wait) continue;
    const Attrs& a = n.attrs;
    const auto k = static_cast<size_t>(a.i("bucket"));
    LJ_CHECK_LT(k, num_buckets);
    Bucket& b = buckets_[k];
    stage_ = static_cast<int>(a.i("stage"));
    b.param_begin = a.i("param_begin");
    b.param_end = a.i("param_end");
    b.flat_begin = a.i("flat_begin");
    b.flat_end = a.i("flat_end");
    b.recv_begin = a.i("recv_begin");
    b.recv_count = a.i("recv_count");
    // The pass and dist/zero.h must agree on the flat vector.
    LJ_CHECK_EQ(b.flat_begin, layout.param_begin(static_cast<size_t>(b.param_begin)));
    LJ_CHECK_EQ(b.flat_end, static_cast<size_t>(b.param_end) == layout.num_params()
                                ? layout.numel()
                                : layout.param_begin(static_cast<size_t>(b.param_end)));
    if (shards_gradients() && b.counts.empty()) {
      for (int r = 0; r < comm.world_size(); ++r) {
        const FlatRange s = layout.shard(r);
        b.counts.push_back(
            std::max<int64_t>(0, std::min(b.flat_end, s.end) - std::max(b.flat_begin, s.begin)));
      }
      LJ_CHECK_EQ(b.counts[static_cast<size_t>(comm.rank())], b.recv_count);
    }
    Bucket* bp = &b;
    if (n.op == Op::grad_reduce_start) {
      ex.set_node_kernel(i, [this, bp](KernelContext& c) { return start(*bp, c); });
    } else {
      ex.set_node_kernel(i, [this, bp](KernelContext& c) { return wait(*bp, c); });
    }
  }
  if (active()) ex.set_after_kernel([this] { poll(); });
}

void GradSync::begin_micro_batch(int index, int count, const std::vector<Tensor>* acc,
                                 std::function<float*(int64_t, int64_t)> shard) {
  LJ_CHECK(index >= 0 && index < count);
  LJ_CHECK(shards_gradients() || index == 0 || acc != nullptr);
  LJ_CHECK(!shards_gradients() || buckets_.empty() || shard != nullptr);
  index_ = index;
  count_ = count;
  acc_ = acc;
  shard_fn_ = std::move(shard);
}

GradSyncTimes GradSync::take_times() {
  GradSyncTimes t = times_;
  times_ = {};
  return t;
}

void GradSync::completed(Bucket& b, double now) {
  if (!b.in_flight) return;
  b.in_flight = false;
  --in_flight_;
  times_.comm_seconds += now - b.started_at;
}

void GradSync::completed(Gather& a, double now) {
  if (!a.in_flight) return;
  a.in_flight = false;
  --in_flight_;
  times_.comm_seconds += now - a.started_at;
}

Status GradSync::start_gather(Gather& a, KernelContext& c) {
  const double t0 = now_seconds();
  const float* shard = c.in[0].as<float>();
  const int64_t mine = a.counts[static_cast<size_t>(comm_.rank())];
  a.handle = comm_.iall_gather(
      std::span<const float>(shard + a.send_begin, static_cast<size_t>(mine)), a.counts,
      std::span<float>(c.out[0].as<float>(), static_cast<size_t>(c.out[0].numel())));
  a.in_flight = true;
  ++in_flight_;
  a.started_at = t0;
  times_.exposed_seconds += now_seconds() - t0;
  return ok_status();
}

Status GradSync::wait_gather(Gather& a, KernelContext& c) {
  const double t0 = now_seconds();
  Status s = ok_status();
  if (a.in_flight) {
    s = a.handle.wait();
    completed(a, now_seconds());
  }
  LJ_RETURN_IF_ERROR(s.with_context(c.node.scope));
  // The parameter is the receive buffer itself (param_gather_wait aliases it): nothing to copy.
  LJ_CHECK(c.out[0].data == c.in[0].data);
  times_.exposed_seconds += now_seconds() - t0;
  return ok_status();
}

void GradSync::poll() {
  if (in_flight_ == 0) return;
  const double t0 = now_seconds();
  for (Bucket& b : buckets_) {
    if (b.in_flight && b.handle.test()) completed(b, now_seconds());
  }
  for (auto& [buffer, a] : gathers_) {
    if (a.in_flight && a.handle.test()) completed(a, now_seconds());
  }
  times_.exposed_seconds += now_seconds() - t0;
}

Status GradSync::start(Bucket& b, KernelContext& c) {
  const double t0 = now_seconds();
  float* buf = c.out[0].as<float>();
  const bool last = index_ == count_ - 1;
  // Stages 0, 1 at the last micro-batch: (accumulated + this one) / count, as TrainStep's
  // accumulation and scale_grads compute it in one process.
  const bool accumulate = !shards_gradients() && last && count_ > 1;
  const auto f = static_cast<float>(1.0 / static_cast<double>(count_));
  int64_t at = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    const float* g = c.in[k].as<float>();
    const int64_t n = c.in[k].numel();
    float* dst = buf + at;
    if (accumulate) {
      const float* a = (*acc_)[static_cast<size_t>(b.param_begin) + k].data<float>();
#pragma omp parallel for schedule(static) num_threads(c.threads) if (n > 65536)
      for (int64_t e = 0; e < n; ++e) dst[e] = (a[e] + g[e]) * f;
    } else {
      std::memcpy(dst, g, static_cast<size_t>(n) * sizeof(float));
    }
    at += n;
  }
  LJ_CHECK_EQ(at, b.flat_end - b.flat_begin);
  const auto n = static_cast<size_t>(at);
  if (shards_gradients()) {
    // In place: this rank's summed part arrives at the buffer's start.
    b.handle = comm_.ireduce_scatter_sum(std::span<const float>(buf, n), b.counts,
                                         std::span<float>(buf, static_cast<size_t>(b.recv_count)));
  } else if (last) {
    b.handle = comm_.iall_reduce_sum(std::span<const float>(buf, n), std::span<float>(buf, n));
  } else {
    times_.exposed_seconds += now_seconds() - t0;
    return ok_status();  // an earlier micro-batch: nothing to reduce yet
  }
  b.in_flight = true;
  ++in_flight_;
  ++times_.buckets;
  b.started_at = t0;  // the packing is part of the collective's time
  times_.exposed_seconds += now_seconds() - t0;
  return ok_status();
}

Status GradSync::wait(Bucket& b, KernelContext& c) {
  const double t0 = now_seconds();
  const bool last = index_ == count_ - 1;
  const float* buf = c.in[0].as<float>();
  Status s = ok_status();
  const bool reduced = b.in_flight;
  if (b.in_flight) {
    s = b.handle.wait();
    completed(b, now_seconds());
  }
  const double t_unpack = now_seconds();
  LJ_RETURN_IF_ERROR(s.with_context("bucket " + std::to_string(c.attrs().i("bucket"))));
  const float mean = 1.0f / static_cast<float>(comm_.world_size());
  if (shards_gradients()) {
    const float* recv = buf;
    const int64_t n = b.recv_count;
    // The shard's part for this bucket, allocated at its first reduction.
    float* dst = n > 0 ? shard_fn_(b.recv_begin, n) : nullptr;
    if (index_ == 0) {
      // A rank that owns none of this bucket has no shard part (dst null): memcpy of 0 bytes
      // from or to a null pointer is still undefined (UBSan, dist.np2 under test-asan).
      if (n > 0) std::memcpy(dst, recv, static_cast<size_t>(n) * sizeof(float));
    } else {
      for (int64_t e = 0; e < n; ++e) dst[e] += recv[e];
    }
    if (last) {
      if (count_ > 1) {
        const auto f = static_cast<float>(1.0 / static_cast<double>(count_));
        for (int64_t e = 0; e < n; ++e) dst[e] *= f;
      }
      for (int64_t e = 0; e < n; ++e) dst[e] *= mean;
    }
    c.out[0].as<float>()[0] = 0.0f;
  } else {
    int64_t at = 0;
    for (TensorView& o : c.out) {
      float* dst = o.as<float>();
      const int64_t n = o.numel();
      if (last) {
        for (int64_t e = 0; e < n; ++e) dst[e] = buf[at + e] * mean;
      } else {
        std::memcpy(dst, buf + at, static_cast<size_t>(n) * sizeof(float));
      }
      at += n;
    }
  }
  const double t1 = now_seconds();
  times_.exposed_seconds += t1 - t0;
  if (reduced) times_.comm_seconds += t1 - t_unpack;  // the unpacking too
  return ok_status();
}

}  // namespace lj
