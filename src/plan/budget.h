// The one rule for "does it fit" (DESIGN.md, "Memory and recompute"): a memory budget is either
// what the user gave (--memory-limit) or kDefaultBudgetFraction of what the device has (a GPU's
// memory, the host's available memory), and a predicted peak fits a budget when it is at most
// budget × (1 − kBudgetSafetyMargin). The planner's search, checkpoint optimization and
// benchmark's refusal of a run that cannot fit all read this file, and so do the help strings.
#pragma once

#include <string>

namespace lj {

// The default budget: this fraction of the device's memory.
inline constexpr double kDefaultBudgetFraction = 0.9;
// "90%": kDefaultBudgetFraction as help strings and reports print it.
std::string default_budget_percent();

// 1%: the predictor's held-out error reaches 0.65% and one configuration's measured peak RSS
// varies by up to 10 MiB at 1 GiB (oneDNN's packing buffers; bench/plan/SWEEP.md), where a
// choice predicted 2 MiB under its budget measured 2 MiB over it once in 4 runs.
inline constexpr double kBudgetSafetyMargin = 0.01;

struct MemoryBudget {
  double bytes = 0;
  // For reports: "--memory-limit", or "90% of available memory" (default_budget's `of`).
  std::string source;
};

// The budget when the user gave none: kDefaultBudgetFraction of `available_bytes`; `of` names
// that memory for the source string ("available memory", "80.00 GiB").
MemoryBudget default_budget(double available_bytes, const std::string& of);
// The user's limit when given (> 0), else default_budget(available_bytes, of).
MemoryBudget budget_or_default(double limit_bytes, double available_bytes, const std::string& of);

// What a prediction may reach under `budget_bytes`.
double usable_bytes(double budget_bytes, double safety_margin = kBudgetSafetyMargin);
// Whether a predicted peak fits the budget: predicted <= usable_bytes(budget).
bool fits(double predicted_bytes, double budget_bytes, double safety_margin = kBudgetSafetyMargin);

}  // namespace lj
