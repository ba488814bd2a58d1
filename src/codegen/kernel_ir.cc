#include "codegen/kernel_ir.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace lj::codegen {
namespace {

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

Status bad(const std::string& line, const std::string& why) {
  return internal_error("kernel IR: " + why + " in '" + line + "'");
}

bool parse_int(const std::string& s, int* out) {
  if (s.empty()) return false;
  size_t used = 0;
  try {
    *out = std::stoi(s, &used);
  } catch (...) {
    return false;
  }
  return used == s.size();
}

bool parse_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  size_t used = 0;
  try {
    *out = std::stod(s, &used);
  } catch (...) {
    return false;
  }
  return used == s.size();
}

// "t12" -> 12 when 12 < defined.
bool parse_temp(const std::string& s, size_t defined, int* out) {
  return s.size() > 1 && s[0] == 't' && parse_int(s.substr(1), out) && *out >= 0 &&
         static_cast<size_t>(*out) < defined;
}

}  // namespace

bool is_kernel_storage(DType compute, DType storage) {
  return storage == compute || (compute == DType::f32 && storage == DType::bf16);
}

bool Kernel::mixed_storage() const {
  for (const KernelInput& in : inputs) {
    if (in.dtype != dtype) return true;
  }
  for (int o = 0; o < static_cast<int>(outputs.size()); ++o) {
    if (output_dtype(o) != dtype) return true;
  }
  return false;
}

bool is_kernel_unary(Op op) {
  switch (op) {
    case Op::neg:
    case Op::exp:
    case Op::log:
    case Op::sqrt:
    case Op::rsqrt:
    case Op::reciprocal:
    case Op::square:
    case Op::silu:
    case Op::sigmoid:
    case Op::tanh:
    case Op::pow_scalar:
      return true;
    default:
      return false;
  }
}

bool is_kernel_binary(Op op) {
  return op == Op::add || op == Op::sub || op == Op::mul || op == Op::div;
}

std::string Kernel::to_text() const {
  std::ostringstream os;
  os << "lj-kernel 1; dtype " << dtype_name(dtype) << "; loop";
  for (int g : loop_groups) os << ' ' << g;
  for (const KernelInput& in : inputs) os << "; in " << dtype_name(in.dtype) << ' ' << in.mask;
  for (size_t i = 0; i < body.size(); ++i) {
    const Instr& x = body[i];
    os << "; t" << i << " = " << op_name(x.op);
    if (x.op == Op::input) os << ' ' << x.input;
    if (x.op == Op::constant) os << ' ' << number(x.value);
    if (x.a >= 0) os << " t" << x.a;
    if (x.b >= 0) os << " t" << x.b;
    if (x.op == Op::pow_scalar) os << ' ' << number(x.value);
    if (x.op == Op::cast) os << ' ' << dtype_name(x.to);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    os << "; out t" << outputs[o];
    const DType dt = output_dtype(static_cast<int>(o));
    if (dt != dtype) os << ' ' << dtype_name(dt);
  }
  if (has_reduce()) os << "; reduce " << op_name(reduce) << " t" << reduce_arg;
  return os.str();
}

StatusOr<Kernel> parse_kernel(std::string_view text) {
  Kernel k;
  // Statements end at ';' or a newline.
  std::string all(text);
  std::replace(all.begin(), all.end(), ';', '\n');
  std::istringstream lines{all};
  std::string line;
  int n = 0;
  bool have_dtype = false, have_loop = false;
  while (std::getline(lines, line)) {
    std::istringstream ws(line);
    std::vector<std::string> w;
    for (std::string s; ws >> s;) w.push_back(s);
    if (w.empty()) continue;
    if (n++ == 0) {
      if (w.size() != 2 || w[0] != "lj-kernel" || w[1] != "1") return bad(line, "bad header");
      continue;
    }
    if (w[0] == "dtype") {
      if (w.size() != 2 || !parse_dtype(w[1], &k.dtype) ||
          (k.dtype != DType::f32 && k.dtype != DType::f64)) {
        return bad(line, "dtype must be f32 or f64");
      }
      have_dtype = true;
    } else if (w[0] == "loop") {
      if (w.size() < 2) return bad(line, "no loop dims");
      for (size_t i = 1; i < w.size(); ++i) {
        int g = 0;
        if (!parse_int(w[i], &g) || g < 0) return bad(line, "bad loop group");
        k.loop_groups.push_back(g);
      }
      have_loop = true;
    } else if (w[0] == "in") {
      KernelInput in;
      if (!have_loop || w.size() != 3 || !parse_dtype(w[1], &in.dtype) ||
          !is_kernel_storage(k.dtype, in.dtype) || w[2].size() != k.loop_groups.size() ||
          w[2].find_first_not_of("01") != std::string::npos) {
        return bad(line, "bad input");
      }
      in.mask = w[2];
      k.inputs.push_back(in);
    } else if (w[0] == "out") {
      int t = 0;
      DType dt = k.dtype;
      if ((w.size() != 2 && w.size() != 3) || !parse_temp(w[1], k.body.size(), &t) ||
          (w.size() == 3 && (!parse_dtype(w[2], &dt) || !is_kernel_storage(k.dtype, dt)))) {
        return bad(line, "bad output");
      }
      k.outputs.push_back(t);
      k.output_dtypes.push_back(dt);
    } else if (w[0] == "reduce") {
      int t = 0;
      Op op;
      if (w.size() != 3 || k.has_reduce() || !find_op(w[1], &op) ||
          (op != Op::sum && op != Op::mean && op != Op::max) ||
          !parse_temp(w[2], k.body.size(), &t)) {
        return bad(line, "bad reduction");
      }
      k.reduce = op;
      k.reduce_arg = t;
    } else {
      // t<i> = op args...
      int t = 0;
      Instr x;
      if (w.size() < 3 || w[1] != "=" || !parse_int(w[0].substr(1), &t) || w[0][0] != 't' ||
          static_cast<size_t>(t) != k.body.size() || !find_op(w[2], &x.op) || !k.outputs.empty() ||
          k.has_reduce()) {
        return bad(line, "bad instruction");
      }
      const size_t nargs = w.size() - 3;
      bool ok = false;
      if (x.op == Op::input) {
        ok = nargs == 1 && parse_int(w[3], &x.input) && x.input >= 0 &&
             static_cast<size_t>(x.input) < k.inputs.size();
      } else if (x.op == Op::constant) {
        ok = nargs == 1 && parse_double(w[3], &x.value);
      } else if (x.op == Op::cast) {
        ok = nargs == 2 && parse_temp(w[3], k.body.size(), &x.a) && parse_dtype(w[4], &x.to) &&
             is_kernel_storage(k.dtype, x.to);
      } else if (x.op == Op::pow_scalar) {
        ok = nargs == 2 && parse_temp(w[3], k.body.size(), &x.a) && parse_double(w[4], &x.value);
      } else if (is_kernel_unary(x.op)) {
        ok = nargs == 1 && parse_temp(w[3], k.body.size(), &x.a);
      } else if (is_kernel_binary(x.op)) {
        ok = nargs == 2 && parse_temp(w[3], k.body.size(), &x.a) &&
             parse_temp(w[4], k.body.size(), &x.b);
      }
      if (!ok) return bad(line, "bad operands");
      k.body.push_back(x);
    }
  }
  if (n == 0 || !have_dtype || !have_loop) return internal_error("kernel IR: incomplete header");
  if (k.num_outputs() == 0) return internal_error("kernel IR: no output");
  return k;
}

int64_t LaunchGeometry::rows() const {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < loop_dims.size(); ++i) r *= loop_dims[i];
  return r;
}

int64_t LaunchGeometry::inner() const {
  return loop_dims.back();
}

Status launch_geometry(const Kernel& k, std::span<const std::vector<int64_t>> in_dims,
                       std::span<const std::vector<int64_t>> out_dims, LaunchGeometry* out) {
  const int rank = k.rank();
  int full_rank = 0;
  for (int g : k.loop_groups) full_rank += g;
  if (in_dims.size() != k.inputs.size() || out_dims.size() != static_cast<size_t>(k.num_outputs()))
    return internal_error("fused kernel: wrong number of operands");
  // L, the group's output shape.
  std::vector<int64_t> loop_shape;
  if (!k.outputs.empty()) {
    loop_shape = out_dims[0];
  } else {
    loop_shape = out_dims.back();
    if (static_cast<int>(loop_shape.size()) == full_rank) loop_shape.pop_back();  // keepdim
    int64_t last = -1;
    for (size_t i = 0; i < k.inputs.size() && last < 0; ++i) {
      if (k.inputs[i].mask.back() == '1' && !in_dims[i].empty()) last = in_dims[i].back();
    }
    if (last < 0) return internal_error("fused kernel: no input spans the reduced dim");
    loop_shape.push_back(last);
  }
  if (static_cast<int>(loop_shape.size()) != full_rank)
    return internal_error("fused kernel: output rank differs from the kernel's loop");
  out->loop_dims.assign(static_cast<size_t>(rank), 1);
  int d = 0;
  for (int l = 0; l < rank; ++l) {
    for (int j = 0; j < k.loop_groups[static_cast<size_t>(l)]; ++j)
      out->loop_dims[static_cast<size_t>(l)] *= loop_shape[static_cast<size_t>(d++)];
  }
  out->strides.assign(k.inputs.size() * static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    int64_t running = 1;
    for (int l = rank - 1; l >= 0; --l) {
      if (k.inputs[i].mask[static_cast<size_t>(l)] == '1') {
        out->strides[i * static_cast<size_t>(rank) + static_cast<size_t>(l)] = running;
        running *= out->loop_dims[static_cast<size_t>(l)];
      }
    }
    int64_t numel = 1;
    for (int64_t x : in_dims[i]) numel *= x;
    if (numel != running)
      return internal_error("fused kernel: input " + std::to_string(i) +
                            " does not match its broadcast mask");
  }
  return ok_status();
}

}  // namespace lj::codegen
