#include "cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/units.h"

namespace lj::cli {

std::string format_progress_line(const ProgressLine& p) {
  const bool finished = p.done >= p.total;
  const bool rate_known = p.rate_per_s > 0;
  const std::string rate = rate_known ? fmt::format("{:.1f} {}/s", p.rate_per_s, p.unit) : "";
  std::string eta;
  if (!finished) {
    eta = rate_known ? "eta " + format_seconds(static_cast<double>(p.total - p.done) / p.rate_per_s)
                     : "eta —";
  }
  const std::string count = fmt::format("{}/{} {}", p.done, p.total, p.unit);
  if (p.bar) {
    constexpr int kWidth = 30;
    const double frac =
        p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 1.0;
    const int fill = std::clamp(static_cast<int>(frac * kWidth), 0, kWidth);
    std::string bar(static_cast<size_t>(fill), '#');
    bar.append(static_cast<size_t>(kWidth - fill), '.');
    std::string line = fmt::format("{} [{}] {}", p.label, bar, count);
    if (!rate.empty()) line += "  " + rate;
    if (!eta.empty()) line += "  " + eta;
    return line;
  }
  std::string paren = rate;
  if (!eta.empty()) paren += (paren.empty() ? "" : ", ") + eta;
  return fmt::format("{}: {}{}", p.label, count, paren.empty() ? "" : " (" + paren + ")");
}

Progress::Progress(std::string label, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), tty_(isatty(STDERR_FILENO) != 0) {}

void Progress::update(int64_t done, int64_t total) {
  const double now = now_seconds();
  if (!started_) {
    started_ = true;
    t_start_ = now;
    done_at_start_ = done;
  }
  const double elapsed = now - t_start_;
  const int64_t counted = done - done_at_start_;
  const double rate = elapsed > 0 && counted > 0 ? static_cast<double>(counted) / elapsed : 0;
  const ProgressLine line{label_, unit_, done, total, rate, tty_};
  if (tty_) {
    // \x1b[K clears what a longer previous line left behind.
    std::fprintf(stderr, "\r%s\x1b[K", format_progress_line(line).c_str());
    drawn_ = true;
  } else {
    const int64_t decile = total > 0 ? done * 10 / total : 10;
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s\n", format_progress_line(line).c_str());
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_ && drawn_) std::fprintf(stderr, "\n");
}

}  // namespace lj::cli
