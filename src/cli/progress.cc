#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/units.h"

namespace lj::cli {

Progress::Progress(std::string label, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      tty_(isatty(STDERR_FILENO) != 0),
      t0_(now_seconds()) {}

void Progress::update(int64_t done, int64_t total) {
  const double elapsed = now_seconds() - t0_;
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1;
  if (tty_) {
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(fill), '#');
    bar.append(static_cast<size_t>(kWidth - fill), '.');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld %s  %.1f %s/s  eta %s   ", label_.c_str(),
                 bar.c_str(), static_cast<long long>(done), static_cast<long long>(total),
                 unit_.c_str(), rate, unit_.c_str(), format_seconds(eta).c_str());
    drawn_ = true;
  } else {
    const int64_t decile = total > 0 ? done * 10 / total : 10;
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s: %lld/%lld %s (%.1f %s/s, eta %s)\n", label_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), unit_.c_str(), rate,
                 unit_.c_str(), format_seconds(eta).c_str());
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_ && drawn_) std::fprintf(stderr, "\n");
}

}  // namespace lj::cli
