#include "backends/cuda/stream.h"

#include "backends/cuda/cuda_check.h"

namespace lj::cuda {

StatusOr<Stream> Stream::create() {
  cudaStream_t s = nullptr;
  LJ_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

Stream::~Stream() {
  if (s_ != nullptr) (void)cudaStreamDestroy(s_);
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (s_ != nullptr) (void)cudaStreamDestroy(s_);
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

Status Stream::synchronize() const {
  return cuda_status(cudaStreamSynchronize(s_), "cudaStreamSynchronize");
}

StatusOr<Event> Event::create(bool timing) {
  cudaEvent_t e = nullptr;
  LJ_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e);
}

Event::~Event() {
  if (e_ != nullptr) (void)cudaEventDestroy(e_);
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (e_ != nullptr) (void)cudaEventDestroy(e_);
    e_ = o.e_;
    o.e_ = nullptr;
  }
  return *this;
}

Status Event::record(const Stream& s) {
  return cuda_status(cudaEventRecord(e_, s.get()), "cudaEventRecord");
}

Status Event::wait_on(const Stream& s) const {
  return cuda_status(cudaStreamWaitEvent(s.get(), e_, 0), "cudaStreamWaitEvent");
}

Status Event::synchronize() const {
  return cuda_status(cudaEventSynchronize(e_), "cudaEventSynchronize");
}

StatusOr<float> Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  LJ_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.e_, e_));
  return ms;
}

}  // namespace lj::cuda
