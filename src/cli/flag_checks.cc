#include "cli/flag_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace lj::cli {
namespace {

// The number in `s`, or false when it is not one (trailing text included).
bool parse_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

CLI::Validator finite_number(bool zero_ok) {
  const std::string what = zero_ok ? "a finite number >= 0" : "a finite number > 0";
  return CLI::Validator(
      [zero_ok, what](std::string& s) -> std::string {
        double v = 0;
        if (!parse_double(s, &v) || !std::isfinite(v) || v < 0 || (!zero_ok && v == 0))
          return "must be " + what + ", got " + s;
        return "";
      },
      zero_ok ? "NUMBER>=0" : "NUMBER>0");
}

}  // namespace

CLI::Validator finite_above_zero() {
  return finite_number(false);
}

CLI::Validator finite_at_least_zero() {
  return finite_number(true);
}

CLI::Validator integer_at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || v < min)
          return "must be an integer >= " + std::to_string(min) + ", got " + s;
        return "";
      },
      "INT>=" + std::to_string(min));
}

CLI::Option* renamed(CLI::Option* opt, const std::string& new_name, const std::string& why) {
  const std::string old_name = opt->get_name();
  return opt->group("")->each([old_name, new_name, why](const std::string&) {
    std::fprintf(stderr, "warning: %s is now %s (%s); the old name will go\n", old_name.c_str(),
                 new_name.c_str(), why.c_str());
  });
}

}  // namespace lj::cli
