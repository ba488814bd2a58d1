// LJ_CHECK(cond) << "context": for broken invariants only (programmer errors). Prints
// file:line, the condition and the streamed context, then aborts. Never use it on user input.
#pragma once

#include <sstream>

namespace lj::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure();
  CheckFailure& self() { return *this; }  // an lvalue for `<<` and Voidify
  template <class T>
  CheckFailure& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
};

// Lets `LJ_CHECK(c) << x;` be an expression of type void in both branches.
struct Voidify {
  void operator&(CheckFailure&) {}
};

}  // namespace lj::detail

#define LJ_CHECK(cond) \
  (cond) ? (void)0     \
         : ::lj::detail::Voidify() & ::lj::detail::CheckFailure(__FILE__, __LINE__, #cond).self()

#define LJ_CHECK_EQ(a, b) LJ_CHECK((a) == (b)) << #a " = " << (a) << ", " #b " = " << (b) << " "
#define LJ_CHECK_LT(a, b) LJ_CHECK((a) < (b)) << #a " = " << (a) << ", " #b " = " << (b) << " "
#define LJ_CHECK_LE(a, b) LJ_CHECK((a) <= (b)) << #a " = " << (a) << ", " #b " = " << (b) << " "
