// An owning tensor: dense, row-major, allocated from a Device. Copies share storage.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backends/kernel.h"
#include "runtime/memory.h"

namespace lj {

class Device;

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage from the device's allocator, counted under `category`.
  static Tensor empty(Device& dev, DType dtype, std::vector<int64_t> dims, MemCategory category);
  static Tensor zeros(Device& dev, DType dtype, std::vector<int64_t> dims, MemCategory category);
  // As empty(), but never taken from or returned to the allocator's cache
  // (CachingAllocator::allocate_uncached): for a large buffer that lives once per step (a
  // collective's packing buffer, ZeRO's gradient shard), so that after it the memory goes back
  // to the system instead of staying reserved for tensors of other sizes.
  static Tensor empty_uncached(Device& dev, DType dtype, std::vector<int64_t> dims,
                               MemCategory category);
  // A block the cache already holds when one fits (returned to the cache), else uncached
  // (returned to the system): a once-per-step buffer that reuses what the step freed but never
  // leaves a new block reserved.
  static Tensor empty_transient(Device& dev, DType dtype, std::vector<int64_t> dims,
                                MemCategory category);
  // Copies `values` (converted to dtype) into a new tensor.
  static Tensor from_doubles(Device& dev, DType dtype, std::vector<int64_t> dims,
                             std::span<const double> values,
                             MemCategory category = MemCategory::temporaries);
  // A tensor over memory it does not own (a place in the planned executor's arena): nothing
  // is allocated, counted or freed for it. `owner`, when given, is kept alive as long as the
  // tensor (or a copy) is; otherwise `data` must outlive it.
  static Tensor borrowed(void* data, DType dtype, std::vector<int64_t> dims,
                         std::shared_ptr<void> owner = nullptr);
  // A tensor sharing this one's storage with other dims (same element count).
  Tensor reshaped(std::vector<int64_t> dims) const;

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t numel() const { return numel_of(dims_); }
  size_t bytes() const {
    return static_cast<size_t>(numel()) * static_cast<size_t>(dtype_size(dtype_));
  }
  void* raw() const { return storage_ ? storage_->data : nullptr; }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  TensorView view() const { return TensorView{raw(), dtype_, dims_}; }
  // Element i converted to double (any dtype); for tests and reports.
  double at(int64_t i) const;
  std::vector<double> to_doubles() const;
  // Same dtype and dims, fresh storage with a copy of the data.
  Tensor clone(Device& dev, MemCategory category) const;

  struct Storage {
    void* data = nullptr;
    size_t bytes = 0;
    MemCategory category = MemCategory::temporaries;
    Device* device = nullptr;
    std::shared_ptr<void> owner;  // borrowed(): what holds `data`
    bool uncached = false;        // empty_uncached()
    ~Storage();
  };

 private:
  // A tensor owning `data` (bytes for dtype and dims, from dev's allocator, `uncached` or not).
  static Tensor owning(Device& dev, DType dtype, std::vector<int64_t> dims, MemCategory category,
                       void* data, bool uncached);

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::f32;
  std::vector<int64_t> dims_;
};

// The context a run executes in (no hidden globals): allocator, accounting and threads. It must
// outlive every tensor allocated from it.
class Device {
 public:
  explicit Device(int threads = 0, bool is_virtual = false);  // threads 0: all hardware threads
  // A virtual device allocates no memory (its tensors have fake addresses and must not be
  // read or written): the executor's dry runs on it predict a run's memory exactly.
  bool is_virtual() const { return allocator_.is_virtual(); }
  int threads() const { return threads_; }
  void set_threads(int threads);
  CachingAllocator& allocator() { return allocator_; }
  const MemoryStats& memory() const { return allocator_.stats(); }

 private:
  int threads_;
  CachingAllocator allocator_;
};

}  // namespace lj
