#include "train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "models/hf_config.h"
#include "train/sharded_checkpoint.h"

namespace lj {
namespace fs = std::filesystem;

namespace {

Status write_text(const std::string& path, const std::string& text) {
  return write_file_atomic(path, [&](FileWriter& w) { return w.write(text.data(), text.size()); });
}

Status write_tensors(const std::string& path, const std::vector<ParamSpec>& specs,
                     const std::vector<Tensor>& ts, const std::string& prefix) {
  std::vector<TensorToWrite> out;
  for (size_t i = 0; i < specs.size(); ++i)
    out.push_back({prefix + specs[i].name, DType::f32, ts[i].dims(), ts[i].raw()});
  return write_safetensors(path, out);
}

// step-N folders that are committed (no ".tmp."), sorted by N.
std::vector<std::pair<int64_t, fs::path>> committed_steps(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("step-", 0) != 0 || name.find(".tmp.") != std::string::npos)
      continue;
    char* end = nullptr;
    const long long n = std::strtoll(name.c_str() + 5, &end, 10);
    if (*end == '\0') steps.emplace_back(n, e.path());
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace

StatusOr<std::vector<Tensor>> read_checkpoint_tensors(const std::string& path,
                                                      const std::vector<ParamSpec>& specs,
                                                      const std::string& prefix,
                                                      MemCategory category, Device& dev) {
  LJ_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
  std::vector<Tensor> out;
  for (const ParamSpec& s : specs) {
    const SafetensorsEntry* e = f.find(prefix + s.name);
    if (e == nullptr)
      return invalid_argument(path + " has no tensor '" + prefix + s.name + "'",
                              "the checkpoint is damaged or from another model");
    if (e->shape != s.dims || e->dtype_name != "F32") {
      return invalid_argument(path + ": tensor '" + prefix + s.name + "' is " + e->dtype_name +
                              dims_to_string(e->shape) + ", expected F32" + dims_to_string(s.dims));
    }
    Tensor t = Tensor::empty(dev, DType::f32, s.dims, category);
    LJ_RETURN_IF_ERROR(
        f.read_f32(*e, std::span<float>(t.data<float>(), static_cast<size_t>(t.numel()))));
    out.push_back(std::move(t));
  }
  return out;
}

std::string latest_checkpoint_dir(const std::string& dir) {
  auto text = read_text_file(dir + "/latest");
  if (!text.ok()) return "";
  std::string name = *text;
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  return name.empty() ? "" : dir + "/" + name;
}

Status save_checkpoint(const std::string& dir, const LlamaConfig& config,
                       const std::vector<ParamSpec>& specs, const Checkpoint& c, int keep_last) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return io_error("cannot create checkpoint folder " + dir + ": " + ec.message(), "check --out");
  const std::string name = "step-" + std::to_string(c.state.step);
  const std::string final_dir = dir + "/" + name;
  const std::string tmp = final_dir + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) return io_error("cannot create " + tmp + ": " + ec.message());
  auto fail = [&](Status s) {
    fs::remove_all(tmp, ec);
    return s;
  };
  Status s = write_tensors(tmp + "/model.safetensors", specs, c.params, "");
  if (s.ok()) {
    std::vector<TensorToWrite> opt;
    for (size_t i = 0; i < specs.size(); ++i) {
      opt.push_back({"m." + specs[i].name, DType::f32, c.m[i].dims(), c.m[i].raw()});
      opt.push_back({"v." + specs[i].name, DType::f32, c.v[i].dims(), c.v[i].raw()});
    }
    s = write_safetensors(tmp + "/optimizer.safetensors", opt);
  }
  if (s.ok()) s = write_text(tmp + "/trainer_state.json", trainer_state_json(c.state) + "\n");
  if (s.ok()) s = write_text(tmp + "/config.json", hf_config_json(config));
  if (s.ok()) s = fsync_parent_dir(tmp + "/config.json");  // the folder's own entries
  if (!s.ok()) return fail(s);
  // A folder of this name that `latest` does not name is left from a crash after its rename:
  // replace it.
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  if (ec) return fail(io_error("renaming " + tmp + " to " + final_dir + ": " + ec.message()));
  LJ_RETURN_IF_ERROR(fsync_parent_dir(final_dir));
  LJ_RETURN_IF_ERROR(write_text(dir + "/latest", name + "\n"));

  return prune_checkpoints(dir, keep_last);
}

Status prune_checkpoints(const std::string& dir, int keep_last) {
  std::error_code ec;
  const std::string latest = fs::path(latest_checkpoint_dir(dir)).filename().string();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool temp = n.find(".tmp.") != std::string::npos &&
                      (n.rfind("step-", 0) == 0 || n.rfind("latest", 0) == 0);
    if (temp) fs::remove_all(e.path(), ec);
  }
  if (keep_last > 0) {
    auto steps = committed_steps(dir);
    for (size_t i = 0; i + static_cast<size_t>(keep_last) < steps.size(); ++i) {
      if (steps[i].second.filename() != latest) fs::remove_all(steps[i].second, ec);
    }
  }
  if (ec) return io_error("pruning checkpoints in " + dir + ": " + ec.message());
  return ok_status();
}

StatusOr<Checkpoint> load_checkpoint(const std::string& step_dir,
                                     const std::vector<ParamSpec>& specs, Device& dev) {
  if (is_sharded_checkpoint(step_dir)) {
    // Written by a data-parallel run: gathered into one process's form.
    LJ_ASSIGN_OR_RETURN(RankCheckpoint r,
                        load_checkpoint_for_rank(step_dir, specs, /*zero_stage=*/0,
                                                 flat_layout_of(specs, 1), /*rank=*/0, dev));
    return Checkpoint{std::move(r.state), std::move(r.params), std::move(r.m), std::move(r.v)};
  }
  Checkpoint c;
  const std::string state_path = step_dir + "/trainer_state.json";
  LJ_ASSIGN_OR_RETURN(std::string text, read_text_file(state_path, "", kMaxCheckpointJsonBytes));
  LJ_ASSIGN_OR_RETURN(c.state, parse_trainer_state(text, state_path));
  LJ_ASSIGN_OR_RETURN(c.params, read_checkpoint_tensors(step_dir + "/model.safetensors", specs, "",
                                                        MemCategory::weights, dev));
  LJ_ASSIGN_OR_RETURN(c.m, read_checkpoint_tensors(step_dir + "/optimizer.safetensors", specs, "m.",
                                                   MemCategory::optimizer, dev));
  LJ_ASSIGN_OR_RETURN(c.v, read_checkpoint_tensors(step_dir + "/optimizer.safetensors", specs, "v.",
                                                   MemCategory::optimizer, dev));
  return c;
}

StatusOr<Checkpoint> load_latest_checkpoint(const std::string& dir,
                                            const std::vector<ParamSpec>& specs, Device& dev) {
  const std::string step_dir = latest_checkpoint_dir(dir);
  if (step_dir.empty()) return not_found("no checkpoint in " + dir);
  if (!fs::is_directory(step_dir)) {
    return invalid_argument(dir + "/latest names " + step_dir + ", which does not exist",
                            "the checkpoint folder is damaged");
  }
  return load_checkpoint(step_dir, specs, dev);
}

}  // namespace lj
