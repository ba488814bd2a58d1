#include "runtime/planned_memory.h"

#include "core/check.h"

namespace lj {

PlannedMemory::~PlannedMemory() {
  release_arena();
}

void PlannedMemory::release_arena() {
  dev_.allocator().deallocate_uncached_split(arena_, arena_split_);
  arena_ = nullptr;
  arena_split_ = {};
  arena_plan_ = nullptr;
}

Status PlannedMemory::prepare(const SymEnv& env) {
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
  if (arena_plan_ == current_) return ok_status();
  release_arena();
  CachingAllocator::CategoryBytes split = current_->bytes_at_peak;
  const auto round = static_cast<int64_t>(CachingAllocator::kRound);
  const int64_t arena = (current_->bytes_arena + round - 1) / round * round;
  split[static_cast<size_t>(MemCategory::temporaries)] += arena - current_->bytes_peak_live;
  arena_ = dev_.allocator().allocate_uncached_split(split);
  if (arena_ == nullptr && arena > 0) {
    return resource_exhausted(
        "out of host memory for the " + std::to_string(arena) + "-byte arena of the memory plan",
        "use a smaller batch or sequence length, or --recompute");
  }
  arena_split_ = split;
  arena_plan_ = current_;
  return ok_status();
}

Tensor PlannedMemory::output(ValueId v, DType dtype, std::vector<int64_t> dims,
                             MemCategory category) {
  const int64_t off = current_->offset(v);
  if (off < 0) {
    LJ_CHECK(current_->is_external(v)) << "value %" << v << " has no planned storage";
    return Tensor::empty(dev_, dtype, std::move(dims), category);
  }
  return Tensor::borrowed(static_cast<char*>(arena_) + off, dtype, std::move(dims));
}

}  // namespace lj
