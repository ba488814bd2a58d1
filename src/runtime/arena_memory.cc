#include "runtime/arena_memory.h"

#include "core/check.h"

namespace lj {

struct ArenaMemory::Arena {
  Device* dev = nullptr;
  const MemoryPlan* plan = nullptr;  // the plan it is laid out for
  void* data = nullptr;
  CachingAllocator::CategoryBytes split{};
  ~Arena() { dev->allocator().deallocate_uncached_split(data, split); }
};

Status ArenaMemory::prepare(const SymEnv& env) {
  current_ = nullptr;
  for (const auto& p : cache_) {
    if (p->env == env) current_ = p.get();
  }
  if (current_ != nullptr) {
    ++cache_hits_;
  } else {
    LJ_ASSIGN_OR_RETURN(MemoryPlan p, plan_memory(g_, env));
    cache_.push_back(std::make_unique<MemoryPlan>(std::move(p)));
    current_ = cache_.back().get();
    ++plans_made_;
  }
  // Reuse the arena unless it is for another shape or the caller holds last run's outputs.
  if (arena_ && arena_->plan == current_ && arena_.use_count() == 1) return ok_status();
  arena_.reset();
  auto arena = std::make_shared<Arena>();
  arena->dev = &dev_;
  arena->plan = current_;
  CachingAllocator::CategoryBytes split = current_->bytes_at_peak;
  const auto round = static_cast<int64_t>(CachingAllocator::kRound);
  const int64_t bytes = (current_->bytes_arena + round - 1) / round * round;
  split[static_cast<size_t>(MemCategory::temporaries)] += bytes - current_->bytes_peak_live;
  arena->data = dev_.allocator().allocate_uncached_split(split);
  if (arena->data == nullptr && bytes > 0) {
    return resource_exhausted(
        "out of host memory for the " + std::to_string(bytes) + "-byte arena of the memory plan",
        "use a smaller batch or sequence length, or --recompute");
  }
  arena->split = split;
  arena_ = std::move(arena);
  ++arenas_allocated_;
  return ok_status();
}

Tensor ArenaMemory::output(ValueId v, DType dtype, std::vector<int64_t> dims) {
  const int64_t off = current_->offset(v);
  LJ_CHECK(off >= 0) << "value %" << v << " has no planned storage";
  void* p = static_cast<char*>(arena_->data) + off;
  return Tensor::borrowed(p, dtype, std::move(dims),
                          current_->is_output(v) ? arena_ : std::shared_ptr<void>());
}

}  // namespace lj
