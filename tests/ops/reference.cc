// Plain double-precision reference kernels; see reference.h. Written for clarity: every loop
// walks explicit multi-indices.
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace lj::ref {

int64_t RefTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

RefTensor zeros(DType dtype, std::vector<int64_t> dims) {
  RefTensor t{dtype, std::move(dims), {}};
  t.data.assign(static_cast<size_t>(t.numel()), 0.0);
  return t;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * dims[static_cast<size_t>(i) + 1];
  }
  return s;
}

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size(), 0);
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    const int64_t d = dims[static_cast<size_t>(i)];
    idx[static_cast<size_t>(i)] = flat % d;
    flat /= d;
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  LJ_CHECK(idx.size() == dims.size());
  int64_t flat = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    LJ_CHECK(idx[i] >= 0 && idx[i] < dims[i]);
    flat = flat * dims[i] + idx[i];
  }
  return flat;
}

int64_t broadcast_index(const std::vector<int64_t>& out_idx, const std::vector<int64_t>& dims) {
  const size_t lead = out_idx.size() - dims.size();
  std::vector<int64_t> idx(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) idx[i] = dims[i] == 1 ? 0 : out_idx[lead + i];
  return ravel(idx, dims);
}

std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    LJ_CHECK(da == db || da == 1 || db == 1) << "shapes do not broadcast";
    out[i] = da == 1 ? db : da;
  }
  return out;
}

double round_to(DType t, double v) {
  switch (t) {
    case DType::f64:
      return v;
    case DType::f32:
      return static_cast<double>(static_cast<float>(v));
    case DType::bf16:
      return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    case DType::f16:
      return f16_to_f32(f32_to_f16(static_cast<float>(v)));
    case DType::i32:
      return static_cast<double>(static_cast<int32_t>(std::trunc(v)));
    case DType::i64:
      return static_cast<double>(static_cast<int64_t>(std::trunc(v)));
    case DType::u8:
      return static_cast<double>(static_cast<uint8_t>(std::trunc(v)));
  }
  return v;
}

// ---- Sources ----

RefTensor constant(double value, DType dtype, std::vector<int64_t> dims) {
  RefTensor t = zeros(dtype, std::move(dims));
  for (double& v : t.data) v = round_to(dtype, value);
  return t;
}

RefTensor iota(std::vector<int64_t> dims, int axis, DType dtype) {
  RefTensor t = zeros(dtype, std::move(dims));
  if (axis < 0) axis += t.rank();
  for (int64_t i = 0; i < t.numel(); ++i) {
    t[i] = static_cast<double>(unravel(i, t.dims)[static_cast<size_t>(axis)]);
  }
  return t;
}

double normal_cdf(double x, double mean, double std) {
  return 0.5 * std::erfc(-(x - mean) / (std * std::sqrt(2.0)));
}

double uniform_cdf(double x, double low, double high) {
  if (x <= low) return 0.0;
  if (x >= high) return 1.0;
  return (x - low) / (high - low);
}

double ks_statistic(std::vector<double> sample, double (*cdf)(double, double, double), double p0,
                    double p1) {
  std::sort(sample.begin(), sample.end());
  const double n = static_cast<double>(sample.size());
  double d = 0.0;
  for (size_t i = 0; i < sample.size(); ++i) {
    const double f = cdf(sample[i], p0, p1);
    d = std::max(d, std::abs(static_cast<double>(i + 1) / n - f));
    d = std::max(d, std::abs(f - static_cast<double>(i) / n));
  }
  return d;
}

// ---- Elementwise ----

double unary_scalar(Op op, double x, double exponent) {
  switch (op) {
    case Op::neg:
      return -x;
    case Op::exp:
      return std::exp(x);
    case Op::log:
      return std::log(x);
    case Op::sqrt:
      return std::sqrt(x);
    case Op::rsqrt:
      return 1.0 / std::sqrt(x);
    case Op::reciprocal:
      return 1.0 / x;
    case Op::square:
      return x * x;
    case Op::silu:
      return x / (1.0 + std::exp(-x));
    case Op::sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Op::tanh:
      return std::tanh(x);
    case Op::pow_scalar:
      return std::pow(x, exponent);
    default:
      LJ_CHECK(false) << "not a unary op: " << op_name(op);
  }
  return 0.0;
}

RefTensor unary(Op op, const RefTensor& x, double exponent) {
  RefTensor out = zeros(x.dtype, x.dims);
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = unary_scalar(op, x[i], exponent);
  return out;
}

RefTensor cast(const RefTensor& x, DType to) {
  RefTensor out = zeros(to, x.dims);
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = round_to(to, x[i]);
  return out;
}

RefTensor binary(Op op, const RefTensor& a, const RefTensor& b) {
  const bool compare = op == Op::eq || op == Op::lt || op == Op::gt;
  RefTensor out = zeros(compare ? DType::u8 : a.dtype, broadcast_dims(a.dims, b.dims));
  for (int64_t i = 0; i < out.numel(); ++i) {
    const std::vector<int64_t> idx = unravel(i, out.dims);
    const double x = a[broadcast_index(idx, a.dims)];
    const double y = b[broadcast_index(idx, b.dims)];
    double r = 0.0;
    switch (op) {
      case Op::add:
        r = x + y;
        break;
      case Op::sub:
        r = x - y;
        break;
      case Op::mul:
        r = x * y;
        break;
      case Op::div:
        r = x / y;
        break;
      case Op::eq:
        r = x == y ? 1.0 : 0.0;
        break;
      case Op::lt:
        r = x < y ? 1.0 : 0.0;
        break;
      case Op::gt:
        r = x > y ? 1.0 : 0.0;
        break;
      default:
        LJ_CHECK(false) << "not a binary op: " << op_name(op);
    }
    out[i] = r;
  }
  return out;
}

RefTensor where(const RefTensor& cond, const RefTensor& a, const RefTensor& b) {
  RefTensor out = zeros(a.dtype, broadcast_dims(cond.dims, broadcast_dims(a.dims, b.dims)));
  for (int64_t i = 0; i < out.numel(); ++i) {
    const std::vector<int64_t> idx = unravel(i, out.dims);
    const bool c = cond[broadcast_index(idx, cond.dims)] != 0.0;
    out[i] = c ? a[broadcast_index(idx, a.dims)] : b[broadcast_index(idx, b.dims)];
  }
  return out;
}

// ---- Reductions ----

RefTensor reduce(Op op, const RefTensor& x, std::vector<int64_t> axes, bool keepdim) {
  const int r = x.rank();
  std::vector<bool> reduced(static_cast<size_t>(r), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + r : a)] = true;
  // Keepdim shape: reduced dims become 1.
  std::vector<int64_t> kept(x.dims);
  int64_t count = 1;
  for (int i = 0; i < r; ++i) {
    if (reduced[static_cast<size_t>(i)]) {
      count *= x.dims[static_cast<size_t>(i)];
      kept[static_cast<size_t>(i)] = 1;
    }
  }
  RefTensor acc = zeros(x.dtype, kept);
  if (op == Op::max) {
    for (double& v : acc.data) v = -std::numeric_limits<double>::infinity();
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, x.dims);
    for (int d = 0; d < r; ++d) {
      if (reduced[static_cast<size_t>(d)]) idx[static_cast<size_t>(d)] = 0;
    }
    double& dst = acc[ravel(idx, kept)];
    dst = op == Op::max ? std::max(dst, x[i]) : dst + x[i];
  }
  if (op == Op::mean) {
    for (double& v : acc.data) v /= static_cast<double>(count);
  } else {
    LJ_CHECK(op == Op::sum || op == Op::max) << "not a reduction: " << op_name(op);
  }
  if (!keepdim) {
    std::vector<int64_t> dims;
    for (int i = 0; i < r; ++i) {
      if (!reduced[static_cast<size_t>(i)]) dims.push_back(x.dims[static_cast<size_t>(i)]);
    }
    acc.dims = dims;
  }
  return acc;
}

namespace {

// softmax or log_softmax along `axis`: for each line along the axis, explicitly.
RefTensor softmax_impl(const RefTensor& x, int axis, bool log) {
  if (axis < 0) axis += x.rank();
  const size_t ax = static_cast<size_t>(axis);
  const int64_t n = x.dims[ax];
  RefTensor out = zeros(x.dtype, x.dims);
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, x.dims);
    if (idx[ax] != 0) continue;  // visit each line once, from its first element
    std::vector<int64_t> line(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      idx[ax] = j;
      line[static_cast<size_t>(j)] = ravel(idx, x.dims);
    }
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t p : line) m = std::max(m, x[p]);
    double s = 0.0;
    for (int64_t p : line) s += std::exp(x[p] - m);
    for (int64_t p : line) out[p] = log ? x[p] - m - std::log(s) : std::exp(x[p] - m) / s;
  }
  return out;
}

}  // namespace

RefTensor softmax(const RefTensor& x, int axis) {
  return softmax_impl(x, axis, false);
}
RefTensor log_softmax(const RefTensor& x, int axis) {
  return softmax_impl(x, axis, true);
}

// ---- Contraction ----

RefTensor matmul(const RefTensor& a, const RefTensor& b, bool ta, bool tb) {
  LJ_CHECK(a.rank() >= 2 && b.rank() >= 2);
  const std::vector<int64_t> a_batch(a.dims.begin(), a.dims.end() - 2);
  const std::vector<int64_t> b_batch(b.dims.begin(), b.dims.end() - 2);
  const int64_t m = ta ? a.dims[a.dims.size() - 1] : a.dims[a.dims.size() - 2];
  const int64_t k = ta ? a.dims[a.dims.size() - 2] : a.dims[a.dims.size() - 1];
  const int64_t kb = tb ? b.dims[b.dims.size() - 1] : b.dims[b.dims.size() - 2];
  const int64_t n = tb ? b.dims[b.dims.size() - 2] : b.dims[b.dims.size() - 1];
  LJ_CHECK(k == kb) << "matmul: contraction dims differ";
  std::vector<int64_t> out_dims = broadcast_dims(a_batch, b_batch);
  const std::vector<int64_t> batch = out_dims;
  out_dims.push_back(m);
  out_dims.push_back(n);
  RefTensor out = zeros(a.dtype, out_dims);
  int64_t num_batch = 1;
  for (int64_t d : batch) num_batch *= d;
  for (int64_t bi = 0; bi < num_batch; ++bi) {
    const std::vector<int64_t> bidx = unravel(bi, batch);
    const int64_t a_off = broadcast_index(bidx, a_batch) * m * k;
    const int64_t b_off = broadcast_index(bidx, b_batch) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = ta ? a[a_off + p * m + i] : a[a_off + i * k + p];
          const double bv = tb ? b[b_off + j * k + p] : b[b_off + p * n + j];
          s += av * bv;
        }
        out[(bi * m + i) * n + j] = s;
      }
    }
  }
  return out;
}

// ---- Data movement ----

RefTensor reshape(const RefTensor& x, std::vector<int64_t> dims) {
  RefTensor out{x.dtype, std::move(dims), x.data};
  LJ_CHECK(out.numel() == x.numel());
  return out;
}

RefTensor permute(const RefTensor& x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = x.dims[static_cast<size_t>(perm[i])];
  RefTensor out = zeros(x.dtype, dims);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const std::vector<int64_t> oidx = unravel(i, dims);
    std::vector<int64_t> xidx(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) xidx[static_cast<size_t>(perm[d])] = oidx[d];
    out[i] = x[ravel(xidx, x.dims)];
  }
  return out;
}

RefTensor slice(const RefTensor& x, int axis, int64_t start, int64_t end) {
  const size_t ax = static_cast<size_t>(axis);
  end = std::min(end, x.dims[ax]);
  std::vector<int64_t> dims = x.dims;
  dims[ax] = end - start;
  RefTensor out = zeros(x.dtype, dims);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, dims);
    idx[ax] += start;
    out[i] = x[ravel(idx, x.dims)];
  }
  return out;
}

RefTensor concat(const std::vector<RefTensor>& xs, int axis) {
  const size_t ax = static_cast<size_t>(axis);
  std::vector<int64_t> dims = xs[0].dims;
  dims[ax] = 0;
  for (const RefTensor& x : xs) dims[ax] += x.dims[ax];
  RefTensor out = zeros(xs[0].dtype, dims);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, dims);
    size_t which = 0;
    while (idx[ax] >= xs[which].dims[ax]) idx[ax] -= xs[which++].dims[ax];
    out[i] = xs[which][ravel(idx, xs[which].dims)];
  }
  return out;
}

RefTensor expand(const RefTensor& x, const std::vector<int64_t>& dims) {
  RefTensor out = zeros(x.dtype, dims);
  for (int64_t i = 0; i < out.numel(); ++i) out[i] = x[broadcast_index(unravel(i, dims), x.dims)];
  return out;
}

RefTensor gather(const RefTensor& table, const RefTensor& ids) {
  const int64_t rows = table.dims[0];
  const int64_t row_size = table.numel() / rows;
  std::vector<int64_t> dims = ids.dims;
  dims.insert(dims.end(), table.dims.begin() + 1, table.dims.end());
  RefTensor out = zeros(table.dtype, dims);
  for (int64_t n = 0; n < ids.numel(); ++n) {
    const int64_t id = static_cast<int64_t>(ids[n]);
    LJ_CHECK(id >= 0 && id < rows) << "reference gather: id out of range";
    for (int64_t c = 0; c < row_size; ++c) out[n * row_size + c] = table[id * row_size + c];
  }
  return out;
}

RefTensor scatter_add(const RefTensor& ids, const RefTensor& src,
                      const std::vector<int64_t>& out_dims) {
  RefTensor out = zeros(src.dtype, out_dims);
  const int64_t rows = out_dims[0];
  const int64_t row_size = out.numel() / rows;
  LJ_CHECK(src.numel() == ids.numel() * row_size);
  for (int64_t n = 0; n < ids.numel(); ++n) {
    const int64_t id = static_cast<int64_t>(ids[n]);
    LJ_CHECK(id >= 0 && id < rows) << "reference scatter_add: id out of range";
    for (int64_t c = 0; c < row_size; ++c) out[id * row_size + c] += src[n * row_size + c];
  }
  return out;
}

// ---- Loss ----

RefTensor cross_entropy(const RefTensor& logits, const RefTensor& labels, int64_t ignore_index) {
  const int64_t n = logits.dims[0];
  const int64_t v = logits.dims[1];
  double total = 0.0;
  int64_t valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = static_cast<int64_t>(labels[i]);
    if (label == ignore_index) continue;
    LJ_CHECK(label >= 0 && label < v) << "reference cross_entropy: label out of range";
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < v; ++j) m = std::max(m, logits[i * v + j]);
    double s = 0.0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(logits[i * v + j] - m);
    total += m + std::log(s) - logits[i * v + label];
    ++valid;
  }
  RefTensor out = zeros(logits.dtype, {});
  out[0] = total / static_cast<double>(valid);  // 0/0 = NaN when no row counts
  return out;
}

RefTensor cross_entropy_backward(const RefTensor& logits, const RefTensor& labels,
                                 const RefTensor& dloss, int64_t ignore_index) {
  const int64_t n = logits.dims[0];
  const int64_t v = logits.dims[1];
  int64_t valid = 0;
  for (int64_t i = 0; i < n; ++i) valid += static_cast<int64_t>(labels[i]) != ignore_index;
  RefTensor out = zeros(logits.dtype, logits.dims);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = static_cast<int64_t>(labels[i]);
    if (label == ignore_index) continue;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < v; ++j) m = std::max(m, logits[i * v + j]);
    double s = 0.0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(logits[i * v + j] - m);
    for (int64_t j = 0; j < v; ++j) {
      const double p = std::exp(logits[i * v + j] - m) / s;
      out[i * v + j] = (p - (j == label ? 1.0 : 0.0)) * dloss[0] / static_cast<double>(valid);
    }
  }
  return out;
}

// ---- Attention ----

namespace {

struct SdpaDims {
  int64_t b, h, g, tq, tk, d;
  double scale;
};

SdpaDims sdpa_dims(const RefTensor& q, const RefTensor& k, double scale) {
  SdpaDims s{q.dims[0], q.dims[1], k.dims[1], q.dims[2], k.dims[2], q.dims[3], scale};
  LJ_CHECK(s.h % s.g == 0) << "reference sdpa: H is not a multiple of G";
  if (s.scale <= 0) s.scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  return s;
}

// The probability matrix P (Tq, Tk) of one (batch, head): softmax over visible keys of
// scale * q_i . k_j, masked entries exactly 0 (causal: j > i; window W > 0: also i - j >= W).
// Also returns each row's log-sum-exp.
std::vector<double> sdpa_probs(const SdpaDims& s, const RefTensor& q, const RefTensor& k,
                               int64_t bi, int64_t hi, bool causal, int64_t window,
                               std::vector<double>* lse) {
  const auto hidden = [&](int64_t i, int64_t j) {
    return (causal && j > i) || (window > 0 && i - j >= window);
  };
  const int64_t gi = hi / (s.h / s.g);
  std::vector<double> scores(static_cast<size_t>(s.tq * s.tk), 0.0);
  lse->assign(static_cast<size_t>(s.tq), 0.0);
  for (int64_t i = 0; i < s.tq; ++i) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < s.tk; ++j) {
      if (hidden(i, j)) continue;
      double dot = 0.0;
      for (int64_t c = 0; c < s.d; ++c) {
        dot += q[ravel({bi, hi, i, c}, q.dims)] * k[ravel({bi, gi, j, c}, k.dims)];
      }
      scores[static_cast<size_t>(i * s.tk + j)] = s.scale * dot;
      m = std::max(m, s.scale * dot);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < s.tk; ++j) {
      if (!hidden(i, j)) sum += std::exp(scores[static_cast<size_t>(i * s.tk + j)] - m);
    }
    (*lse)[static_cast<size_t>(i)] = m + std::log(sum);
    for (int64_t j = 0; j < s.tk; ++j) {
      double& p = scores[static_cast<size_t>(i * s.tk + j)];
      p = hidden(i, j) ? 0.0 : std::exp(p - (*lse)[static_cast<size_t>(i)]);
    }
  }
  return scores;
}

}  // namespace

SdpaOut sdpa(const RefTensor& q, const RefTensor& k, const RefTensor& v, bool causal, double scale,
             int64_t window) {
  const SdpaDims s = sdpa_dims(q, k, scale);
  SdpaOut r{zeros(q.dtype, q.dims), zeros(q.dtype, {s.b, s.h, s.tq})};
  for (int64_t bi = 0; bi < s.b; ++bi) {
    for (int64_t hi = 0; hi < s.h; ++hi) {
      const int64_t gi = hi / (s.h / s.g);
      std::vector<double> lse;
      const std::vector<double> p = sdpa_probs(s, q, k, bi, hi, causal, window, &lse);
      for (int64_t i = 0; i < s.tq; ++i) {
        r.lse[ravel({bi, hi, i}, r.lse.dims)] = lse[static_cast<size_t>(i)];
        for (int64_t c = 0; c < s.d; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < s.tk; ++j) {
            acc += p[static_cast<size_t>(i * s.tk + j)] * v[ravel({bi, gi, j, c}, v.dims)];
          }
          r.out[ravel({bi, hi, i, c}, q.dims)] = acc;
        }
      }
    }
  }
  return r;
}

SdpaGrads sdpa_backward(const RefTensor& q, const RefTensor& k, const RefTensor& v,
                        const RefTensor& dout, bool causal, double scale, int64_t window) {
  const SdpaDims s = sdpa_dims(q, k, scale);
  SdpaGrads r{zeros(q.dtype, q.dims), zeros(k.dtype, k.dims), zeros(v.dtype, v.dims)};
  for (int64_t bi = 0; bi < s.b; ++bi) {
    for (int64_t hi = 0; hi < s.h; ++hi) {
      const int64_t gi = hi / (s.h / s.g);
      std::vector<double> lse;
      const std::vector<double> p = sdpa_probs(s, q, k, bi, hi, causal, window, &lse);
      // dP[i][j] = dout_i . v_j ;  dS[i][j] = P[i][j] * (dP[i][j] - sum_l P[i][l] dP[i][l]).
      std::vector<double> dp(p.size(), 0.0);
      for (int64_t i = 0; i < s.tq; ++i) {
        for (int64_t j = 0; j < s.tk; ++j) {
          double acc = 0.0;
          for (int64_t c = 0; c < s.d; ++c) {
            acc += dout[ravel({bi, hi, i, c}, dout.dims)] * v[ravel({bi, gi, j, c}, v.dims)];
          }
          dp[static_cast<size_t>(i * s.tk + j)] = acc;
        }
      }
      for (int64_t i = 0; i < s.tq; ++i) {
        double row = 0.0;
        for (int64_t j = 0; j < s.tk; ++j) {
          row += p[static_cast<size_t>(i * s.tk + j)] * dp[static_cast<size_t>(i * s.tk + j)];
        }
        for (int64_t j = 0; j < s.tk; ++j) {
          const double pij = p[static_cast<size_t>(i * s.tk + j)];
          const double ds = pij * (dp[static_cast<size_t>(i * s.tk + j)] - row);
          for (int64_t c = 0; c < s.d; ++c) {
            r.dv[ravel({bi, gi, j, c}, v.dims)] += pij * dout[ravel({bi, hi, i, c}, dout.dims)];
            r.dq[ravel({bi, hi, i, c}, q.dims)] += s.scale * ds * k[ravel({bi, gi, j, c}, k.dims)];
            r.dk[ravel({bi, gi, j, c}, k.dims)] += s.scale * ds * q[ravel({bi, hi, i, c}, q.dims)];
          }
        }
      }
    }
  }
  return r;
}

}  // namespace lj::ref
