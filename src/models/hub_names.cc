#include "models/hub_names.h"

namespace lj {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<HubPiece> hub_pieces(const LlamaConfig& c, const ParamSpec& s) {
  const bool mixtral = c.family == ModelFamily::mixtral;
  const std::string kRouter = "mlp.gate.weight", kGateUp = "mlp.experts.gate_up_proj",
                    kDown = "mlp.experts.down_proj";
  const bool router = c.is_moe() && ends_with(s.name, kRouter);
  const bool gate_up = c.is_moe() && ends_with(s.name, kGateUp);
  const bool down = c.is_moe() && ends_with(s.name, kDown);
  if (!router && !gate_up && !down) return {{s.name, s.dims, 0}};
  const std::string& tail = router ? kRouter : gate_up ? kGateUp : kDown;
  const std::string layer = s.name.substr(0, s.name.size() - tail.size());  // "model.layers.3."
  const std::string block = layer + (mixtral ? "block_sparse_moe." : "mlp.");
  if (router) return {{block + "gate.weight", s.dims, 0}};
  const int64_t experts = s.dims[0], rows = s.dims[1], cols = s.dims[2];
  std::vector<HubPiece> out;
  for (int64_t e = 0; e < experts; ++e) {
    const std::string expert = block + "experts." + std::to_string(e) + ".";
    const int64_t at = e * rows * cols;
    if (down) {
      out.push_back({expert + (mixtral ? "w2" : "down_proj") + ".weight", {rows, cols}, at});
      continue;
    }
    // gate_up_proj: the gate's F rows, then the up projection's.
    const int64_t f = rows / 2;
    out.push_back({expert + (mixtral ? "w1" : "gate_proj") + ".weight", {f, cols}, at});
    out.push_back({expert + (mixtral ? "w3" : "up_proj") + ".weight", {f, cols}, at + f * cols});
  }
  return out;
}

}  // namespace lj
