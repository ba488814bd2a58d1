// Streams and events of the CUDA backend, owned RAII-style. The executor computes on one
// stream; collectives get their own and order against compute with events (record on one,
// wait on the other), so they overlap.
#pragma once

#include <cuda_runtime_api.h>

#include "core/status.h"

namespace lj::cuda {

class Stream {
 public:
  // A non-blocking stream on the current device (it does not synchronise with stream 0).
  static StatusOr<Stream> create();
  Stream() = default;
  ~Stream();
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return s_; }
  Status synchronize() const;

 private:
  explicit Stream(cudaStream_t s) : s_(s) {}
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  // timing: the event can measure elapsed time (costs a little on record).
  static StatusOr<Event> create(bool timing = false);
  Event() = default;
  ~Event();
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Status record(const Stream& s);
  // Makes `s` wait (on the device, the host does not block) until this event has completed.
  Status wait_on(const Stream& s) const;
  Status synchronize() const;
  // Milliseconds between `start` and this event; both recorded with timing.
  StatusOr<float> elapsed_ms_since(const Event& start) const;
  cudaEvent_t get() const { return e_; }

 private:
  explicit Event(cudaEvent_t e) : e_(e) {}
  cudaEvent_t e_ = nullptr;
};

}  // namespace lj::cuda
