// Progress for long work: a bar with rate and ETA redrawn in place when stderr is a terminal,
// otherwise a plain line every 10% so logs stay readable.
#pragma once

#include <cstdint>
#include <string>

namespace lj::cli {

class Progress {
 public:
  Progress(std::string label, std::string unit);
  void update(int64_t done, int64_t total);
  void finish();
  bool is_tty() const { return tty_; }

 private:
  std::string label_, unit_;
  bool tty_;
  double t0_;
  int64_t last_decile_ = -1;
  bool drawn_ = false;
};

}  // namespace lj::cli
