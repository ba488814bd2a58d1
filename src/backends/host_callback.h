// Host callbacks for the `opaque` op: functions registered at run time under a name, called by
// the kernel with the node's input and output tensors. A callback is how a user's own host code
// (an inspector, a custom op without a kernel) runs inside a graph; the compiler treats each one
// as a graph break. Registration is thread-safe; a name registered again replaces the old one.
#pragma once

#include <functional>
#include <string>

#include "backends/kernel.h"

namespace lj {

struct HostCallback {
  // y = f(x); x and y have the same type.
  std::function<Status(const TensorView& x, TensorView& y)> forward;
  // dx from (x, dy); empty: the callback is not differentiable (running its backward fails).
  std::function<Status(const TensorView& x, const TensorView& dy, TensorView& dx)> backward;
};

void register_host_callback(const std::string& name, HostCallback cb);
void unregister_host_callback(const std::string& name);
// A copy of the registered callback; false when none has that name.
bool find_host_callback(const std::string& name, HostCallback* out);

}  // namespace lj
