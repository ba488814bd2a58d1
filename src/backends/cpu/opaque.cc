// The `opaque` kernel: looks the host callback up by name and calls it.
#include <map>
#include <mutex>

#include "backends/cpu/cpu.h"
#include "backends/host_callback.h"

namespace lj {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, HostCallback>& registry() {
  static std::map<std::string, HostCallback> r;
  return r;
}

}  // namespace

void register_host_callback(const std::string& name, HostCallback cb) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[name] = std::move(cb);
}

void unregister_host_callback(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(name);
}

bool find_host_callback(const std::string& name, HostCallback* out) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(name);
  if (it == registry().end()) return false;
  *out = it->second;
  return true;
}

namespace cpu {
namespace {

Status opaque_forward(KernelContext& c) {
  const std::string& name = c.attrs().s("callback");
  HostCallback cb;
  if (!find_host_callback(name, &cb)) {
    return not_found("no host callback named '" + name + "' is registered",
                     "register it with register_host_callback() before the run");
  }
  if (!c.attrs().b_or("backward", false)) return cb.forward(c.in[0], c.out[0]);
  if (!cb.backward) {
    return invalid_argument("host callback '" + name + "' has no backward function",
                            "give HostCallback::backward, or keep the callback out of "
                            "the differentiated part of the graph");
  }
  return cb.backward(c.in[0], c.in[1], c.out[0]);
}

}  // namespace

void register_opaque(KernelTable& t) {
  t[Op::opaque] = opaque_forward;
  t.bf16[static_cast<int>(Op::opaque)] = true;
}

}  // namespace cpu
}  // namespace lj
