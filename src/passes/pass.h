// The compiler's pass interface and the pass manager. A Pass rewrites a Graph in place and says
// whether it changed anything; the PassManager runs a list of passes in order, checks the graph
// after each one (verify(), always in builds without NDEBUG, or with LJ_VERIFY_PASSES=1), dumps
// it when LJ_DUMP=DIR is set (DIR/NN-<pass>.txt, print_graph format), and reports per-pass
// timings and node counts.
//
// Each pass's header states what must run before and after it (as XLA's passes do).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/ir.h"

namespace lj {

class Pass {
 public:
  virtual ~Pass() = default;
  // Short, file-name safe: "dce", "cse".
  virtual const char* name() const = 0;
  // Rewrites `g`; returns whether the graph changed. An error leaves `g` unspecified.
  virtual StatusOr<bool> run(Graph& g) = 0;
};

// One pass's run.
struct PassRun {
  std::string name;
  bool changed = false;
  double wall_s = 0;
  int64_t nodes_before = 0;
  int64_t nodes_after = 0;
};

struct PassReport {
  std::vector<PassRun> runs;  // in the order the passes ran
  bool changed() const;
  double wall_s() const;  // total over the passes
  // A small table: "pass  changed  nodes before -> after  ms".
  std::string to_string() const;
};

class PassManager {
 public:
  void add(std::unique_ptr<Pass> pass);
  // The passes' names, in the order they will run.
  std::vector<std::string> names() const;
  // Runs every pass once, in order. Errors name the pass (a pass's own error, a graph that no
  // longer verifies, a dump that could not be written).
  StatusOr<PassReport> run(Graph& g);

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

}  // namespace lj
