// The one rule for "does it fit" (DESIGN.md, "Memory and recompute"): a memory budget is either
// what the user gave (--memory-limit) or kDefaultBudgetFraction of what the device has (a GPU's
// memory, the host's available memory), and a predicted peak fits a budget when it is at most
// budget × (1 − kBudgetSafetyMargin), the margin measured for the predictor's under-predictions.
// The planner's search, checkpoint optimization and benchmark's refusal of a run that cannot fit
// all read this file, and so do the help strings.
#pragma once

#include <string>

namespace lj {

// The default budget: this fraction of the device's memory.
inline constexpr double kDefaultBudgetFraction = 0.9;
// "90%": kDefaultBudgetFraction as help strings and reports print it.
std::string default_budget_percent();

// 0.9%, from the predictor's measured error distribution: the largest under-prediction of the
// CPU host model in two validation runs of 52 configurations each (Intel Xeon avx512, 2 threads:
// bench/plan/hosts/intel-xeon-processor.md): -0.78% and -0.63% on the 26 held-out runs (20 of
// them random shapes never fitted), -0.84% on a run of the fit set; rounded up. Peaks are
// measured with the malloc thresholds pinned (runtime/malloc_policy.h), which removed the
// 8-10 MiB bimodal peaks that once pushed a choice over its budget (bench/plan/SWEEP.md).
inline constexpr double kBudgetSafetyMargin = 0.009;
// One line for reports: the rule and where its margin comes from.
std::string safety_margin_note();

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
