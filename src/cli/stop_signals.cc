// SIGTERM / SIGINT taken by a waiting thread; see stop_signals.h.
#include "cli/stop_signals.h"

#include <pthread.h>

#include <ctime>

#include "core/check.h"

namespace lj::cli {
namespace {

// Whether a StopSignals is live, and the flag it delivers to (null: none yet).
std::atomic<bool> g_live{false};
std::atomic<std::atomic<bool>*> g_target{nullptr};

// Async-signal-safe: sets the flag, or, before there is one, does what the default action
// would have done (the signal ends the process). A handler still running on another thread
// after the StopSignals ended (the handlers are restored before g_live turns false) re-raises
// under the restored action instead: ignored where the previous action ignores it.
void take(int sig) {
  std::atomic<bool>* t = g_target.load();
  if (t != nullptr) {
    t->store(true);
    return;
  }
  if (!g_live.load()) {
    raise(sig);  // pending until this handler returns, then the restored action takes it
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
}

// For threads started before the StopSignals (they have the signals unblocked).
extern "C" void on_stop_signal(int sig) {
  take(sig);
}

}  // namespace

StopSignals::StopSignals() {
  LJ_CHECK(!g_live.exchange(true)) << "one StopSignals at a time";
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  LJ_CHECK(pthread_sigmask(SIG_BLOCK, &set_, &old_mask_) == 0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGINT, &sa, &old_int_);
  // Started with the signals blocked (it inherits this thread's mask): sigwait takes them.
  waiter_ = std::thread([this] { wait_loop(); });
}

void StopSignals::deliver_to(std::atomic<bool>* stop) {
  g_target.store(stop);
}

void StopSignals::wait_loop() {
  for (;;) {
    int sig = 0;
    if (sigwait(&set_, &sig) != 0) continue;
    if (quit_.load()) return;
    take(sig);
  }
}

StopSignals::~StopSignals() {
  quit_.store(true);
  // A signal to the waiting thread alone: its sigwait returns and it sees quit_.
  pthread_kill(waiter_.native_handle(), SIGTERM);
  waiter_.join();
  // What arrived after the waiter ended: taken here, as the waiter would have, rather than by
  // the previous handler the moment the mask is restored.
  const timespec now{0, 0};
  for (int sig; (sig = sigtimedwait(&set_, nullptr, &now)) > 0;) take(sig);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
  g_live.store(false);  // before the target: a late handler then sees the restored action
  g_target.store(nullptr);
}

}  // namespace lj::cli
