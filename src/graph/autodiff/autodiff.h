// Reverse-mode autodiff over the graph. Appends the backward pass of a scalar loss to the same
// graph (phase backward, each backward node carrying the scope of the forward node it comes
// from), producing one joint graph. Gradients reaching a value from several uses are summed
// in a fixed order (the order of the uses), so results are reproducible. Integer values and
// values the loss does not depend on get no gradient; a parameter the loss does not reach gets
// zeros.
#pragma once

#include <span>
#include <vector>

#include "graph/ir.h"

namespace lj {

// Returns, for each value in `wrt`, the id of d(loss)/d(value). `loss` must be a float scalar
// (shape ()) or a tensor whose gradient is seeded with ones.
StatusOr<std::vector<ValueId>> append_gradients(Graph* g, ValueId loss,
                                                std::span<const ValueId> wrt);

}  // namespace lj
