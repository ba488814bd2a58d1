#include "train/sharded_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/tensorboard.h"
#include "models/hf_config.h"

namespace lj {
namespace fs = std::filesystem;

namespace {

// A test hook for tests/e2e/dist_kill_test.sh: LJ_TEST_KILL_AT=checkpoint:N makes the last rank,
// LJ_TEST_KILL_AT=checkpoint:N:R rank R, kill itself (SIGKILL: no handler, no flush) at the
// checkpoint of step N after its files are written and before the barrier, the worst moment for
// the commit protocol (rank 0's files are the model and the manifest's inputs). Unset: nothing.
void test_kill_at_checkpoint(int rank, int world, int64_t step) {
  const char* at = std::getenv("LJ_TEST_KILL_AT");
  if (at == nullptr || world < 2) return;
  const std::string here = "checkpoint:" + std::to_string(step);
  const std::string want(at);
  if ((want == here && rank == world - 1) || want == here + ":" + std::to_string(rank))
    std::raise(SIGKILL);
}

std::string shard_file_name(int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof(name), "optimizer-rank-%05d-of-%05d.safetensors", rank, world);
  return name;
}

// Size and CRC-32C of a whole file, read in 1 MiB chunks.
struct FileSum {
  int64_t bytes = 0;
  uint32_t crc32c = 0;
};
StatusOr<FileSum> file_sum(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return io_error("cannot open " + path + ": " + std::strerror(errno));
  std::vector<char> buf(1 << 20);
  FileSum s;
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    s.crc32c = crc32c_extend(s.crc32c, buf.data(), n);
    s.bytes += static_cast<int64_t>(n);
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return io_error("reading " + path + " failed");
  return s;
}

// The file's size and checksum against the manifest's entry `e`.
Status verify_file(const std::string& path, const ManifestFile& e) {
  LJ_ASSIGN_OR_RETURN(FileSum s, file_sum(path));
  if (s.bytes != e.bytes || s.crc32c != e.crc32c) {
    return invalid_argument(path + " does not match the manifest (" + std::to_string(s.bytes) +
                                " bytes, CRC-32C " + std::to_string(s.crc32c) + "; expected " +
                                std::to_string(e.bytes) + " bytes, " + std::to_string(e.crc32c) +
                                ")",
                            "the checkpoint is damaged; resume from an earlier step-N folder");
  }
  return ok_status();
}

Status write_text(const std::string& path, const std::string& text) {
  return write_file_atomic(path, [&](FileWriter& w) { return w.write(text.data(), text.size()); });
}

// Writes `path` with 1-D f32 tensors "m" and "v" of n elements each.
Status write_moments(const std::string& path, const float* m, const float* v, int64_t n,
                     FlatRange range) {
  return write_safetensors(
      path, {{"m", DType::f32, {n}, m}, {"v", DType::f32, {n}, v}},
      {{"flat_begin", std::to_string(range.begin)}, {"flat_end", std::to_string(range.end)}});
}

// This rank's files: the optimizer shard (and, on rank 0, the parameters and config). Returns the
// range and sums of the optimizer file it wrote (an empty range when it wrote none).
struct Written {
  FlatRange range;
  FileSum sum;
  FileSum params_sum;  // rank 0
};
StatusOr<Written> write_rank_files(Communicator& comm, const std::string& tmp,
                                   const LlamaConfig& config, const std::vector<ParamSpec>& specs,
                                   const FlatLayout& layout, const ShardedCheckpoint& c) {
  const int rank = comm.rank(), world = comm.world_size();
  Written w;
  if (rank == 0) {
    std::vector<TensorToWrite> out;
    for (size_t i = 0; i < specs.size(); ++i)
      out.push_back({specs[i].name, DType::f32, (*c.params)[i].dims(), (*c.params)[i].raw()});
    const std::string path = tmp + "/model.safetensors";
    LJ_RETURN_IF_ERROR(write_safetensors(path, out));
    LJ_ASSIGN_OR_RETURN(w.params_sum, file_sum(path));
    LJ_RETURN_IF_ERROR(write_text(tmp + "/config.json", hf_config_json(config)));
  }
  const std::string path = tmp + "/" + shard_file_name(rank, world);
  const FlatRange held = layout.held(rank, c.zero_stage, ZeroSharded::optimizer_states);
  if (!zero_shards(c.zero_stage, ZeroSharded::optimizer_states)) {
    if (rank != 0) return w;  // every rank holds the same full states
    w.range = held;
    std::vector<float> m(static_cast<size_t>(layout.numel())), v(m.size());
    pack_flat(layout, *c.m, w.range, m.data());
    pack_flat(layout, *c.v, w.range, v.data());
    LJ_RETURN_IF_ERROR(write_moments(path, m.data(), v.data(), w.range.size(), w.range));
  } else {
    w.range = held;  // the padding is not saved
    if (w.range.size() <= 0) return Written{{0, 0}, {}, w.params_sum};
    LJ_CHECK_EQ(c.m->size(), 1u);
    LJ_CHECK_EQ((*c.m)[0].numel(), layout.held_numel(c.zero_stage, ZeroSharded::optimizer_states));
    LJ_RETURN_IF_ERROR(write_moments(path, (*c.m)[0].data<float>(), (*c.v)[0].data<float>(),
                                     w.range.size(), w.range));
  }
  LJ_ASSIGN_OR_RETURN(w.sum, file_sum(path));
  return w;
}

}  // namespace

FlatLayout flat_layout_of(const std::vector<ParamSpec>& specs, int world_size) {
  std::vector<int64_t> numels;
  for (const ParamSpec& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.dims) n *= d;
    numels.push_back(n);
  }
  return FlatLayout(std::move(numels), world_size);
}

bool is_sharded_checkpoint(const std::string& step_dir) {
  return fs::exists(step_dir + "/manifest.json");
}

Status save_sharded_checkpoint(Communicator& comm, const std::string& dir,
                               const LlamaConfig& config, const std::vector<ParamSpec>& specs,
                               const ShardedCheckpoint& c, int keep_last) {
  LJ_CHECK(c.params != nullptr && c.m != nullptr && c.v != nullptr);
  LJ_CHECK(c.zero_stage >= 0 && c.zero_stage <= 3) << "stage " << c.zero_stage;
  const int rank = comm.rank(), world = comm.world_size();
  const FlatLayout layout = flat_layout_of(specs, world);
  const std::string name = "step-" + std::to_string(c.state.step);
  const std::string final_dir = dir + "/" + name;

  // 1. Rank 0 makes the temporary folder; its name (rank 0's pid) goes to every rank.
  std::error_code ec;
  Status made;
  int64_t pid = ::getpid();
  if (rank == 0) {
    fs::create_directories(dir, ec);
    if (ec) {
      made =
          io_error("cannot create checkpoint folder " + dir + ": " + ec.message(), "check --out");
    } else {
      const std::string tmp = final_dir + ".tmp." + std::to_string(pid);
      fs::remove_all(tmp, ec);
      if (!fs::create_directory(tmp, ec))
        made = io_error("cannot create " + tmp + ": " + ec.message());
    }
  }
  LJ_RETURN_IF_ERROR(agree_on_status(comm, made));
  LJ_RETURN_IF_ERROR(comm.broadcast(
      std::span<std::byte>(reinterpret_cast<std::byte*>(&pid), sizeof(pid)), /*root=*/0));
  const std::string tmp = final_dir + ".tmp." + std::to_string(pid);
  auto drop_tmp = [&](Status s) {
    if (rank == 0) fs::remove_all(tmp, ec);
    return s;
  };

  // 2. Every rank writes and fsyncs its files; 3. the all-reduce after it is the barrier.
  StatusOr<Written> written = write_rank_files(comm, tmp, config, specs, layout, c);
  test_kill_at_checkpoint(rank, world, c.state.step);
  if (Status s = agree_on_status(comm, written.status()); !s.ok()) return drop_tmp(s);
  const Written& w = *written;
  LJ_ASSIGN_OR_RETURN(
      std::vector<double> all,
      all_gather_exact(comm,
                       {static_cast<double>(w.range.begin), static_cast<double>(w.range.end),
                        static_cast<double>(w.sum.bytes), static_cast<double>(w.sum.crc32c)}));

  // 4. Rank 0 commits: manifest, rename, `latest`; then every rank learns how that went.
  Status committed;
  if (rank == 0) {
    nlohmann::ordered_json j;
    j["format"] = kShardedCheckpointFormat;
    j["version"] = kShardedCheckpointVersion;
    j["step"] = c.state.step;
    j["world_size"] = world;
    j["zero_stage"] = c.zero_stage;
    j["flat_layout"] = {{"numel", layout.numel()},
                        {"numel_padded", layout.numel_padded()},
                        {"padding", layout.numel_padded() - layout.numel()},
                        {"shard_numel", layout.shard_numel()}};
    j["trainer_state"] = nlohmann::ordered_json::parse(trainer_state_json(c.state));
    j["parameters"] = {{"file", "model.safetensors"},
                       {"rank", 0},
                       {"bytes", w.params_sum.bytes},
                       {"crc32c", w.params_sum.crc32c}};
    nlohmann::ordered_json shards = nlohmann::ordered_json::array();
    for (int r = 0; r < world; ++r) {
      const double* row = &all[static_cast<size_t>(r) * 4];
      if (row[1] <= row[0]) continue;  // wrote no optimizer file
      shards.push_back({{"file", shard_file_name(r, world)},
                        {"rank", r},
                        {"begin", static_cast<int64_t>(row[0])},
                        {"end", static_cast<int64_t>(row[1])},
                        {"bytes", static_cast<int64_t>(row[2])},
                        {"crc32c", static_cast<uint32_t>(row[3])}});
    }
    j["optimizer_shards"] = std::move(shards);
    committed = write_text(tmp + "/manifest.json", j.dump(2) + "\n");
    if (committed.ok()) committed = fsync_parent_dir(tmp + "/manifest.json");
    if (committed.ok()) {
      // A folder of this name that `latest` does not name is left from a crash after its rename.
      fs::remove_all(final_dir, ec);
      fs::rename(tmp, final_dir, ec);
      if (ec) committed = io_error("renaming " + tmp + " to " + final_dir + ": " + ec.message());
    }
    if (committed.ok()) committed = fsync_parent_dir(final_dir);
    if (committed.ok()) committed = write_text(dir + "/latest", name + "\n");
    if (committed.ok()) committed = prune_checkpoints(dir, keep_last);
    if (!committed.ok()) fs::remove_all(tmp, ec);
  }
  return agree_on_status(comm, committed);
}

StatusOr<RankCheckpoint> load_checkpoint_for_rank(const std::string& step_dir,
                                                  const std::vector<ParamSpec>& specs,
                                                  int zero_stage, const FlatLayout& layout,
                                                  int rank, Device& dev) {
  LJ_CHECK(zero_stage >= 0 && zero_stage <= 3) << "stage " << zero_stage;
  LJ_CHECK(rank >= 0 && rank < layout.world_size());
  // The flat range this rank's optimizer needs (never the padding).
  const bool sharded = zero_shards(zero_stage, ZeroSharded::optimizer_states);
  const FlatRange want = layout.held(rank, zero_stage, ZeroSharded::optimizer_states);
  // Shapes the flat m, v (over `want`) for the optimizer.
  auto shape_states = [&](const float* m, const float* v, RankCheckpoint* out) {
    if (!sharded) {
      for (const ParamSpec& s : specs) {
        out->m.push_back(Tensor::zeros(dev, DType::f32, s.dims, MemCategory::optimizer));
        out->v.push_back(Tensor::zeros(dev, DType::f32, s.dims, MemCategory::optimizer));
      }
      unpack_flat(layout, m, 1.0f, want, out->m);
      unpack_flat(layout, v, 1.0f, want, out->v);
      return;
    }
    const int64_t n = std::max<int64_t>(want.size(), 0);
    for (auto [src, dst] : {std::pair{m, &out->m}, std::pair{v, &out->v}}) {
      Tensor t = Tensor::zeros(dev, DType::f32,
                               {layout.held_numel(zero_stage, ZeroSharded::optimizer_states)},
                               MemCategory::optimizer);
      if (n > 0) std::memcpy(t.data<float>(), src, static_cast<size_t>(n) * sizeof(float));
      dst->push_back(std::move(t));
    }
  };

  RankCheckpoint out;
  if (!is_sharded_checkpoint(step_dir)) {
    // One process wrote it: per-parameter states, gathered into the range this rank needs.
    LJ_ASSIGN_OR_RETURN(Checkpoint c, load_checkpoint(step_dir, specs, dev));
    out.state = c.state;
    out.params = std::move(c.params);
    if (!sharded) {
      out.m = std::move(c.m);
      out.v = std::move(c.v);
      return out;
    }
    std::vector<float> m(static_cast<size_t>(std::max<int64_t>(want.size(), 0))), v(m.size());
    if (!m.empty()) {
      pack_flat(layout, c.m, want, m.data());
      pack_flat(layout, c.v, want, v.data());
    }
    shape_states(m.data(), v.data(), &out);
    return out;
  }

  const std::string manifest_path = step_dir + "/manifest.json";
  LJ_ASSIGN_OR_RETURN(std::string text, read_text_file(manifest_path, "", kMaxCheckpointJsonBytes));
  LJ_ASSIGN_OR_RETURN(const ShardedManifest manifest, parse_sharded_manifest(text, manifest_path));
  out.state = manifest.state;
  out.sharded = true;
  out.saved_world_size = manifest.world_size;
  out.saved_zero_stage = manifest.zero_stage;
  const int64_t numel = manifest.numel;
  if (numel != layout.numel()) {
    return invalid_argument(manifest_path + " holds " + std::to_string(numel) +
                                " parameters, this model has " + std::to_string(layout.numel()),
                            "resume with the model the checkpoint was trained with");
  }

  // Parameters: whole, from rank 0's file.
  const std::string params_path = step_dir + "/" + manifest.parameters.file;
  LJ_RETURN_IF_ERROR(verify_file(params_path, manifest.parameters));
  LJ_ASSIGN_OR_RETURN(out.params,
                      read_checkpoint_tensors(params_path, specs, "", MemCategory::weights, dev));

  // Optimizer states: the manifest's shards tile [0, numel) in order (parse_sharded_manifest).
  const size_t n = static_cast<size_t>(std::max<int64_t>(want.size(), 0));
  std::vector<float> m(n), v(n);
  for (const ManifestShard& e : manifest.optimizer_shards) {
    const FlatRange have{e.begin, e.end};
    const FlatRange both{std::max(have.begin, want.begin), std::min(have.end, want.end)};
    if (both.size() <= 0) continue;
    const std::string path = step_dir + "/" + e.file;
    LJ_RETURN_IF_ERROR(verify_file(path, e));
    LJ_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
    std::vector<float> buf;
    for (auto [tensor, dst] : {std::pair{"m", &m}, std::pair{"v", &v}}) {
      const SafetensorsEntry* t = f.find(tensor);
      if (t == nullptr || t->dtype_name != "F32" || t->shape != std::vector<int64_t>{have.size()}) {
        return invalid_argument(path + ": no F32 tensor '" + tensor + "' of " +
                                    std::to_string(have.size()) + " elements",
                                "the checkpoint is damaged");
      }
      // Sized only now that the file holds that many elements.
      buf.resize(static_cast<size_t>(have.size()));
      LJ_RETURN_IF_ERROR(f.read_f32(*t, buf));
      std::memcpy(dst->data() + (both.begin - want.begin), buf.data() + (both.begin - have.begin),
                  static_cast<size_t>(both.size()) * sizeof(float));
    }
  }
  shape_states(m.data(), v.data(), &out);
  return out;
}

}  // namespace lj
