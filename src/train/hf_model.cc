#include "train/hf_model.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/json_read.h"
#include "core/log.h"
#include "core/text_file.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "models/hf_config.h"
#include "models/hub_names.h"

namespace lj {
namespace fs = std::filesystem;

namespace {

StatusOr<std::map<std::string, std::string>> read_index(const std::string& path) {
  LJ_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
      !j["weight_map"].is_object()) {
    return invalid_argument(path + ": not a safetensors index (no weight_map object)");
  }
  std::map<std::string, std::string> m;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    const std::string* name = json_string_if(it.value());
    if (name == nullptr)
      return invalid_argument(path + ": weight_map value of '" + it.key() + "' is not a string");
    const std::string shard = *name;
    if (shard.find('/') != std::string::npos)
      return invalid_argument(path + ": shard name '" + shard + "' holds a path");
    m[it.key()] = shard;
  }
  return m;
}

}  // namespace

StatusOr<HfModel> load_hf_model(const std::string& dir, Device& dev) {
  HfModel m;
  LJ_ASSIGN_OR_RETURN(m.config, load_hf_config(dir + "/config.json"));
  m.specs = llama_param_specs(m.config);

  std::map<std::string, std::string> where;  // tensor -> shard file
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string single = dir + "/model.safetensors";
  std::map<std::string, SafetensorsFile> files;
  if (fs::exists(index)) {
    LJ_ASSIGN_OR_RETURN(where, read_index(index));
  } else if (!fs::exists(single)) {
    return not_found(dir + " holds no model.safetensors or model.safetensors.index.json",
                     "give a folder written by save_pretrained or ljperf export");
  }
  auto file_for = [&](const std::string& name) -> StatusOr<const SafetensorsFile*> {
    std::string shard = "model.safetensors";
    if (!where.empty()) {
      auto it = where.find(name);
      if (it == where.end())
        return not_found(dir + ": the index does not list tensor '" + name + "'");
      shard = it->second;
    }
    auto f = files.find(shard);
    if (f == files.end()) {
      LJ_ASSIGN_OR_RETURN(SafetensorsFile opened, SafetensorsFile::open(dir + "/" + shard));
      f = files.emplace(shard, std::move(opened)).first;
    }
    return &f->second;
  };

  // Whether the folder holds tensor `name` (in the index, or in the single file).
  auto holds = [&](const std::string& name) -> StatusOr<bool> {
    if (!where.empty()) return where.count(name) > 0;
    LJ_ASSIGN_OR_RETURN(const SafetensorsFile* f, file_for(name));
    return f->find(name) != nullptr;
  };
  // Reads tensor `name` of shape `dims` into `out`.
  auto read = [&](const std::string& name, const std::vector<int64_t>& dims,
                  std::span<float> out) -> Status {
    LJ_ASSIGN_OR_RETURN(const SafetensorsFile* f, file_for(name));
    const SafetensorsEntry* e = f->find(name);
    if (e == nullptr)
      return not_found(f->path() + " has no tensor '" + name + "'",
                       "do config.json and the weights describe the same model?");
    if (e->shape != dims) {
      return invalid_argument(f->path() + ": tensor '" + name + "' is " + dims_to_string(e->shape) +
                              ", the config needs " + dims_to_string(dims));
    }
    return f->read_f32(*e, out);
  };

  for (const ParamSpec& s : m.specs) {
    Tensor t = Tensor::empty(dev, DType::f32, s.dims, MemCategory::weights);
    const std::span<float> all(t.data<float>(), static_cast<size_t>(t.numel()));
    // The Hub's tensors (per expert), or the parameter whole under ljperf's name, which is
    // transformers 5's in-memory name (what ljperf's checkpoints and a torch save hold).
    const std::vector<HubPiece> pieces = hub_pieces(m.config, s);
    const bool renamed = pieces.size() > 1 || pieces[0].name != s.name;
    LJ_ASSIGN_OR_RETURN(const bool whole, renamed ? holds(s.name) : StatusOr<bool>(true));
    if (whole) {
      LJ_RETURN_IF_ERROR(read(s.name, s.dims, all));
    } else {
      for (const HubPiece& p : pieces) {
        const Status r =
            read(p.name, p.dims,
                 all.subspan(static_cast<size_t>(p.offset), static_cast<size_t>(numel_of(p.dims))));
        if (!r.ok() && pieces.size() > 1) {
          return r.with_context("expert weights of " + s.name + " (" +
                                std::to_string(pieces.size()) + " per-expert tensors)");
        }
        LJ_RETURN_IF_ERROR(r);
      }
    }
    m.params.push_back(std::move(t));
  }
  return m;
}

Status save_hf_model(const std::string& dir, const LlamaConfig& config,
                     const std::vector<ParamSpec>& specs, const std::vector<Tensor>& params,
                     const HfSaveOptions& options) {
  const DType dtype = options.dtype;
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16) {
    return invalid_argument(std::string("cannot write weights as ") + dtype_name(dtype),
                            "use f32, bf16 or f16");
  }
  // The 16-bit copies, converted before anything is written (an f16 overflow writes nothing).
  std::vector<std::vector<uint16_t>> half(dtype == DType::f32 ? 0 : params.size());
  for (size_t i = 0; i < half.size(); ++i) {
    const float* p = params[i].data<float>();
    half[i].resize(static_cast<size_t>(params[i].numel()));
    for (size_t k = 0; k < half[i].size(); ++k) {
      if (dtype == DType::bf16) {
        half[i][k] = f32_to_bf16(p[k]);
      } else {
        half[i][k] = f32_to_f16(p[k]);
        if (std::isfinite(p[k]) && !std::isfinite(f16_to_f32(half[i][k]))) {
          return invalid_argument("weight '" + specs[i].name + "' holds " + std::to_string(p[k]) +
                                      ", beyond float16's range (65504)",
                                  "export with --dtype bf16 or f32");
        }
      }
    }
  }
  const int64_t max_shard_bytes = options.max_shard_bytes;
  if (fs::exists(dir))
    return invalid_argument(dir + " already exists", "choose a new output folder or remove it");
  const fs::path parent =
      fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path();
  if (!fs::is_directory(parent))
    return not_found("parent folder " + parent.string() + " does not exist");
  const std::string tmp = dir + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec))
    return io_error("cannot create " + tmp + ": " + ec.message(), "check permissions");

  auto fail = [&](Status s) {
    fs::remove_all(tmp, ec);
    return s;
  };
  LlamaConfig written = config;
  written.torch_dtype = dtype;
  const std::string cfg = hf_config_json(written);
  Status s = write_file_atomic(tmp + "/config.json",
                               [&](FileWriter& w) { return w.write(cfg.data(), cfg.size()); });
  if (!s.ok()) return fail(s);

  // The Hub's tensors (experts one by one), grouped into shards of at most max_shard_bytes (a
  // larger tensor gets its own shard).
  std::vector<TensorToWrite> hub;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto* base =
        static_cast<const char*>(dtype == DType::f32 ? params[i].raw() : half[i].data());
    for (const HubPiece& p : hub_pieces(config, specs[i])) {
      hub.push_back({p.name, dtype, p.dims, base + p.offset * dtype_size(dtype)});
    }
  }
  std::vector<std::vector<size_t>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < hub.size(); ++i) {
    const auto bytes = numel_of(hub[i].shape) * dtype_size(dtype);
    if (in_shard > 0 && in_shard + bytes > max_shard_bytes) shards.emplace_back(), in_shard = 0;
    shards.back().push_back(i);
    in_shard += bytes;
    total += bytes;
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    const std::string file = shards.size() == 1 ? "model.safetensors" : name;
    std::vector<TensorToWrite> ts;
    for (size_t i : shards[k]) {
      ts.push_back(hub[i]);
      weight_map[hub[i].name] = file;
    }
    s = write_safetensors(tmp + "/" + file, ts);
    if (!s.ok()) return fail(s);
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json idx;
    idx["metadata"] = {{"total_size", total}};
    idx["weight_map"] = weight_map;
    const std::string text = idx.dump(2) + "\n";
    s = write_file_atomic(tmp + "/model.safetensors.index.json",
                          [&](FileWriter& w) { return w.write(text.data(), text.size()); });
    if (!s.ok()) return fail(s);
  }
  for (const std::string& file : options.extra_files) {
    s = copy_file_atomic(file, tmp + "/" + fs::path(file).filename().string());
    if (!s.ok()) return fail(s);
  }
  fs::rename(tmp, dir, ec);
  if (ec) return fail(io_error("renaming " + tmp + " to " + dir + ": " + ec.message()));
  return fsync_parent_dir(dir);
}

}  // namespace lj
