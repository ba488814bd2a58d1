// The arithmetic of a kernel instruction as C-family source text, shared by the C++ and CUDA
// renderers. What differs between them is only how math functions are spelled (a builtin on the
// CPU, CUDA's device function on the GPU), how inputs are loaded and how casts round: the
// renderers keep `input` and `cast` and pass the spellings.
#pragma once

#include <string>

#include "codegen/kernel_ir.h"

namespace lj::codegen {

// Function names, each called as name(args): exp, log, sqrt, tanh, pow (base, exponent).
struct MathSpelling {
  std::string exp, log, sqrt, tanh, pow;
};

// A double as a literal of the kernel's compute type T (17 significant digits: exact).
std::string literal(double v);

// The expression of x over its operand temporaries a and b. Every op but input and cast (which
// the renderer spells); returns "" for those and for ops that are not kernel arithmetic.
std::string math_expr(const Instr& x, const std::string& a, const std::string& b,
                      const MathSpelling& s);

}  // namespace lj::codegen
