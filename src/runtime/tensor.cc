#include "runtime/tensor.h"

#include <omp.h>

#include <cstring>

#include "core/check.h"

namespace lj {
namespace {

size_t bytes_of(DType dtype, const std::vector<int64_t>& dims) {
  return static_cast<size_t>(numel_of(dims)) * static_cast<size_t>(dtype_size(dtype));
}

}  // namespace

Tensor::Storage::~Storage() {
  if (device == nullptr) return;
  if (uncached) {
    device->allocator().deallocate_uncached(data, bytes, category);
  } else {
    device->allocator().deallocate(data, bytes, category);
  }
}

Tensor Tensor::owning(Device& dev, DType dtype, std::vector<int64_t> dims, MemCategory category,
                      void* data, bool uncached) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  auto s = std::make_shared<Storage>();
  s->bytes = t.bytes();
  s->category = category;
  s->uncached = uncached;
  s->data = data;
  s->device = &dev;
  t.storage_ = std::move(s);
  return t;
}

Tensor Tensor::empty_transient(Device& dev, DType dtype, std::vector<int64_t> dims,
                               MemCategory category) {
  const size_t bytes = bytes_of(dtype, dims);
  void* p = dev.allocator().allocate_from_cache(bytes, category);
  if (p == nullptr) return empty_uncached(dev, dtype, std::move(dims), category);
  return owning(dev, dtype, std::move(dims), category, p, /*uncached=*/false);
}

Tensor Tensor::empty_uncached(Device& dev, DType dtype, std::vector<int64_t> dims,
                              MemCategory category) {
  const size_t bytes = bytes_of(dtype, dims);
  void* p = dev.allocator().allocate_uncached(bytes, category);
  LJ_CHECK(p != nullptr) << "out of host memory allocating " << bytes << " bytes";
  return owning(dev, dtype, std::move(dims), category, p, /*uncached=*/true);
}

Tensor Tensor::empty(Device& dev, DType dtype, std::vector<int64_t> dims, MemCategory category) {
  const size_t bytes = bytes_of(dtype, dims);
  void* p = dev.allocator().allocate(bytes, category);
  LJ_CHECK(p != nullptr) << "out of host memory allocating " << bytes << " bytes";
  return owning(dev, dtype, std::move(dims), category, p, /*uncached=*/false);
}

Tensor Tensor::borrowed(void* data, DType dtype, std::vector<int64_t> dims,
                        std::shared_ptr<void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  auto s = std::make_shared<Storage>();
  s->bytes = t.bytes();
  s->data = data;  // device stays nullptr: the storage frees nothing
  s->owner = std::move(owner);
  t.storage_ = std::move(s);
  return t;
}

Tensor Tensor::zeros(Device& dev, DType dtype, std::vector<int64_t> dims, MemCategory category) {
  Tensor t = empty(dev, dtype, std::move(dims), category);
  if (!dev.is_virtual()) std::memset(t.raw(), 0, t.bytes());
  return t;
}

namespace {
void store(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::f64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v));
      break;
    case DType::f16:
      static_cast<uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v));
      break;
    case DType::i32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
    case DType::i64:
      static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      break;
    case DType::u8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
      break;
  }
}
double load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f64:
      return static_cast<const double*>(p)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::i32:
      return static_cast<const int32_t*>(p)[i];
    case DType::i64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::u8:
      return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}
}  // namespace

Tensor Tensor::from_doubles(Device& dev, DType dtype, std::vector<int64_t> dims,
                            std::span<const double> values, MemCategory category) {
  Tensor t = empty(dev, dtype, std::move(dims), category);
  LJ_CHECK_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) store(t.raw(), dtype, i, values[static_cast<size_t>(i)]);
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> dims) const {
  LJ_CHECK_EQ(numel_of(dims), numel());
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

double Tensor::at(int64_t i) const {
  LJ_CHECK(i >= 0 && i < numel()) << "index " << i;
  return load(raw(), dtype_, i);
}

std::vector<double> Tensor::to_doubles() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = load(raw(), dtype_, i);
  return v;
}

Tensor Tensor::clone(Device& dev, MemCategory category) const {
  Tensor t = empty(dev, dtype_, dims_, category);
  std::memcpy(t.raw(), raw(), bytes());
  return t;
}

Device::Device(int threads, bool is_virtual) : allocator_(is_virtual) {
  set_threads(threads);
}

void Device::set_threads(int threads) {
  threads_ = threads > 0 ? threads : omp_get_max_threads();
}

}  // namespace lj
