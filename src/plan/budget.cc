#include "plan/budget.h"

#include <cstdio>

namespace lj {

std::string default_budget_percent() {
  char text[32];
  std::snprintf(text, sizeof text, "%g%%", 100.0 * kDefaultBudgetFraction);
  return text;
}

std::string safety_margin_note() {
  char text[200];
  std::snprintf(text, sizeof text,
                "a choice fits when its predicted peak is at most the budget less %g%% and %g MiB, "
                "the under-predictions measured in the predictor's validation (bench/plan/hosts/)",
                100.0 * kBudgetSafetyMargin.fraction,
                kBudgetSafetyMargin.bytes / (1024.0 * 1024.0));
  return text;
}

MemoryBudget default_budget(double available_bytes, const std::string& of) {
  return MemoryBudget{kDefaultBudgetFraction * available_bytes,
                      default_budget_percent() + " of " + of};
}

MemoryBudget budget_or_default(double limit_bytes, double available_bytes, const std::string& of) {
  if (limit_bytes > 0) return MemoryBudget{limit_bytes, "--memory-limit"};
  return default_budget(available_bytes, of);
}

double usable_bytes(double budget_bytes, SafetyMargin safety_margin) {
  return budget_bytes * (1.0 - safety_margin.fraction) - safety_margin.bytes;
}

bool fits(double predicted_bytes, double budget_bytes, SafetyMargin safety_margin) {
  return predicted_bytes <= usable_bytes(budget_bytes, safety_margin);
}

}  // namespace lj
