#include "codegen/math_expr.h"

#include <cstdio>

namespace lj::codegen {

std::string literal(double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "static_cast<T>(%.17g)", v);
  return buf;
}

std::string math_expr(const Instr& x, const std::string& a, const std::string& b,
                      const MathSpelling& s) {
  switch (x.op) {
    case Op::constant:
      return literal(x.value);
    case Op::neg:
      return "-" + a;
    case Op::exp:
      return s.exp + "(" + a + ")";
    case Op::log:
      return s.log + "(" + a + ")";
    case Op::sqrt:
      return s.sqrt + "(" + a + ")";
    case Op::rsqrt:
      return "T(1) / " + s.sqrt + "(" + a + ")";
    case Op::reciprocal:
      return "T(1) / " + a;
    case Op::square:
      return a + " * " + a;
    case Op::silu:
      return a + " / (T(1) + " + s.exp + "(-" + a + "))";
    case Op::sigmoid:
      return "T(1) / (T(1) + " + s.exp + "(-" + a + "))";
    case Op::tanh:
      return s.tanh + "(" + a + ")";
    case Op::pow_scalar:
      // The exponents with an exact cheaper form get it, as the eager kernel does.
      if (x.value == 1.0) return a;
      if (x.value == 2.0) return a + " * " + a;
      if (x.value == -1.0) return "T(1) / " + a;
      return s.pow + "(" + a + ", " + literal(x.value) + ")";
    case Op::add:
      return a + " + " + b;
    case Op::sub:
      return a + " - " + b;
    case Op::mul:
      return a + " * " + b;
    case Op::div:
      return a + " / " + b;
    default:
      return "";
  }
}

}  // namespace lj::codegen
