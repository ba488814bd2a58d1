// Shape inference for data movement: reshape, permute, slice, concat, expand, gather,
// scatter_add. Symbolic dims (B, T) are compared exactly: B*T matches T*B but not 4*T.
#include <algorithm>
#include <cstdint>

#include "graph/infer_util.h"

namespace lj {

namespace {

// A slice end at or past this counts as "to the end" for a symbolic dim, whose value is
// unknown when the graph is built (symbolic dims are assumed to stay below 2^31).
constexpr int64_t kWholeDimEnd = INT32_MAX;

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

// reshape: x (...) -> attr shape, which may hold one -1 (inferred); element counts must match.
Status infer_reshape(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& target = c.attrs.shape("shape");
  int infer_at = -1;
  Dim known(1);
  for (int i = 0; i < target.rank(); ++i) {
    const Dim& d = target[i];
    if (d.is_concrete() && d.coef() == -1) {
      if (infer_at >= 0)
        return shape_error(c, "shape " + target.to_string() + " has more than one -1");
      infer_at = i;
      continue;
    }
    if (!infer::valid_dim(d)) {
      return shape_error(c, "shape " + target.to_string() + " has an invalid dim " + d.to_string());
    }
    known = known * d;
  }
  const Dim numel = c.in[0].shape.numel();
  Shape shape = target;
  if (infer_at >= 0) {
    Dim rest;
    if (!numel.divide(known, &rest)) {
      return shape_error(c, "cannot infer the -1 in " + target.to_string() + ": " +
                                numel.to_string() + " elements are not a multiple of " +
                                known.to_string());
    }
    shape[infer_at] = rest;
  } else if (known != numel) {
    return shape_error(c, "cannot reshape " + numel.to_string() + " elements to " +
                              target.to_string() + " (" + known.to_string() + " elements)");
  }
  out->assign(1, TypedShape{c.in[0].dtype, std::move(shape)});
  return ok_status();
}

// permute: x (d_0, ..., d_{r-1}) -> (d_perm[0], ..., d_perm[r-1]); perm may use negative axes.
Status infer_permute(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& x = c.in[0].shape;
  const std::vector<int64_t>& perm = c.attrs.ints("perm");
  if (static_cast<int>(perm.size()) != x.rank()) {
    return shape_error(c, "perm " + ints_to_string(perm) + " does not have one entry per dim");
  }
  std::vector<bool> seen(perm.size(), false);
  std::vector<Dim> dims;
  for (int64_t p : perm) {
    int axis = 0;
    if (!infer::norm_axis(p, x.rank(), &axis) || seen[static_cast<size_t>(axis)]) {
      return shape_error(c, "perm " + ints_to_string(perm) + " is not a permutation of the dims");
    }
    seen[static_cast<size_t>(axis)] = true;
    dims.push_back(x[axis]);
  }
  out->assign(1, TypedShape{c.in[0].dtype, Shape(std::move(dims))});
  return ok_status();
}

// slice: x (..., d, ...) -> (..., min(end, d) - start, ...) along attr axis; 0 <= start <= end.
// A symbolic d may only be taken whole: start 0 and end >= 2^31 - 1 (e.g. INT64_MAX).
Status infer_slice(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& x = c.in[0].shape;
  int axis = 0;
  if (!infer::norm_axis(c.attrs.i("axis"), x.rank(), &axis)) {
    return shape_error(c, "axis " + std::to_string(c.attrs.i("axis")) + " is out of range");
  }
  const int64_t start = c.attrs.i("start");
  const int64_t end = c.attrs.i("end");
  std::string range = "[";  // (built by appending: GCC 12 warns falsely on "[" + to_string)
  range += std::to_string(start) + ", " + std::to_string(end) + ")";
  if (start < 0 || end < start)
    return shape_error(c, "bad range " + range + ": need 0 <= start <= end");
  const Dim& d = x[axis];
  Shape shape = x;
  if (!d.is_concrete()) {
    if (start != 0 || end < kWholeDimEnd) {
      return shape_error(
          c, "symbolic dim " + d.to_string() + " can only be sliced whole, got " + range);
    }
  } else {
    const int64_t stop = std::min(end, d.value());
    if (start > stop) {
      return shape_error(c, "range " + range + " starts past dim " + std::to_string(axis) +
                                " of size " + d.to_string());
    }
    shape[axis] = Dim(stop - start);
  }
  out->assign(1, TypedShape{c.in[0].dtype, std::move(shape)});
  return ok_status();
}

// concat: xs (..., d_i, ...) -> (..., sum d_i, ...) along attr axis; other dims equal, the
// axis dims concrete.
Status infer_concat(const InferCtx& c, std::vector<TypedShape>* out) {
  if (c.in.empty()) return shape_error(c, "needs at least one input");
  const Shape& x0 = c.in[0].shape;
  int axis = 0;
  if (!infer::norm_axis(c.attrs.i("axis"), x0.rank(), &axis)) {
    return shape_error(c, "axis " + std::to_string(c.attrs.i("axis")) + " is out of range");
  }
  int64_t total = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    const Shape& x = c.in[k].shape;
    LJ_RETURN_IF_ERROR(infer::require_same_dtype(c, 0, static_cast<int>(k)));
    if (x.rank() != x0.rank()) return shape_error(c, "inputs have different ranks");
    for (int i = 0; i < x.rank(); ++i) {
      if (i != axis && x[i] != x0[i]) {
        return shape_error(
            c, "dim " + std::to_string(i) + " differs between inputs 0 and " + std::to_string(k));
      }
    }
    if (!x[axis].is_concrete()) {
      return shape_error(c, "the concatenated dim must be concrete, input " + std::to_string(k) +
                                " has " + x[axis].to_string());
    }
    total += x[axis].value();
  }
  Shape shape = x0;
  shape[axis] = Dim(total);
  out->assign(1, TypedShape{c.in[0].dtype, std::move(shape)});
  return ok_status();
}

// expand: x (...) -> attr shape, as torch.expand: leading dims may be added, dims of size 1
// broadcast, every other dim stays. (Unlike torch, -1 is not accepted: give the full shape.)
Status infer_expand(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& x = c.in[0].shape;
  const Shape& target = c.attrs.shape("shape");
  LJ_RETURN_IF_ERROR(infer::check_shape_attr(c, target, "shape"));
  const int lead = target.rank() - x.rank();
  if (lead < 0) return shape_error(c, "cannot expand to fewer dims: " + target.to_string());
  for (int i = 0; i < x.rank(); ++i) {
    if (x[i] != target[lead + i] && x[i] != Dim(1)) {
      return shape_error(c, "cannot expand to " + target.to_string() + ": dim " +
                                std::to_string(i) + " is " + x[i].to_string() + ", not 1 or " +
                                target[lead + i].to_string());
    }
  }
  out->assign(1, TypedShape{c.in[0].dtype, target});
  return ok_status();
}

// gather: table (V, C...), ids (N...) i32/i64 -> (N..., C...) of table's dtype.
Status infer_gather(const InferCtx& c, std::vector<TypedShape>* out) {
  const Shape& table = c.in[0].shape;
  if (table.rank() < 1) return shape_error(c, "table must have rank >= 1: (V, C...)");
  LJ_RETURN_IF_ERROR(infer::require_index(c, 1, "ids"));
  std::vector<Dim> dims = c.in[1].shape.dims();
  dims.insert(dims.end(), table.dims().begin() + 1, table.dims().end());
  out->assign(1, TypedShape{c.in[0].dtype, Shape(std::move(dims))});
  return ok_status();
}

// scatter_add: ids (N...) i32/i64, src (N..., C...) -> attr shape (V, C...) of src's dtype.
Status infer_scatter_add(const InferCtx& c, std::vector<TypedShape>* out) {
  LJ_RETURN_IF_ERROR(infer::require_index(c, 0, "ids"));
  const Shape& ids = c.in[0].shape;
  const Shape& src = c.in[1].shape;
  const Shape& target = c.attrs.shape("shape");
  LJ_RETURN_IF_ERROR(infer::check_shape_attr(c, target, "shape"));
  if (src.rank() < ids.rank()) return shape_error(c, "src must start with the ids' dims");
  for (int i = 0; i < ids.rank(); ++i) {
    if (src[i] != ids[i]) return shape_error(c, "src must start with the ids' dims");
  }
  const int row_rank = src.rank() - ids.rank();
  if (target.rank() != row_rank + 1) {
    return shape_error(c, "output shape " + target.to_string() + " must be (V, C...) with rank " +
                              std::to_string(row_rank + 1));
  }
  for (int i = 0; i < row_rank; ++i) {
    if (target[i + 1] != src[ids.rank() + i]) {
      return shape_error(
          c, "output shape " + target.to_string() + " does not end with src's row dims");
    }
  }
  out->assign(1, TypedShape{c.in[1].dtype, target});
  return ok_status();
}

}  // namespace lj
