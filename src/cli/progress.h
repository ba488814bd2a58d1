// Progress for long work: a bar with rate and ETA redrawn in place when stderr is a terminal,
// otherwise a plain line every 10% so logs stay readable. The rate is measured from the first
// update (so setup before the work, such as building a graph, does not count); the ETA shows
// "—" while the rate is unknown and disappears when the work is done.
#pragma once

#include <cstdint>
#include <string>

namespace lj::cli {

// What one progress line shows.
struct ProgressLine {
  std::string label;  // "eval"
  std::string unit;   // "batches"
  int64_t done = 0;
  int64_t total = 0;
  double rate_per_s = 0;  // units per second; 0 while unknown
  bool bar = false;       // the terminal form with a [###...] bar
};

// "eval: 3/8 batches (2.5 batches/s, eta 2.00 s)", "eval: 0/8 batches (eta —)" while the rate is
// unknown, "eval: 8/8 batches (2.5 batches/s)" when done; with `bar`, "eval [#####.....] 3/8
// batches  2.5 batches/s  eta 2.00 s". No newline or carriage return.
std::string format_progress_line(const ProgressLine& p);

class Progress {
 public:
  Progress(std::string label, std::string unit);
  void update(int64_t done, int64_t total);
  void finish();
  bool is_tty() const { return tty_; }

 private:
  std::string label_, unit_;
  bool tty_;
  bool started_ = false;
  double t_start_ = 0;         // time of the first update
  int64_t done_at_start_ = 0;  // `done` at the first update
  int64_t last_decile_ = -1;
  bool drawn_ = false;
};

}  // namespace lj::cli
