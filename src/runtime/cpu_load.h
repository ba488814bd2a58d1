// How busy this host's CPUs are with other processes, for measurements that must not be taken
// (or trusted) while others hold the cores: /proc/stat's busy time of every CPU minus this
// process's own CPU time, as a share of the cores' time over an interval; and the 1-minute load
// average per core (/proc/loadavg).
#pragma once

namespace lj {

// A point to measure from: wall time, the host's busy CPU seconds (all CPUs: user, nice,
// system, irq, softirq, steal), of which steal (the hypervisor ran another guest on a virtual
// CPU that wanted to run), and this process's CPU seconds.
struct CpuLoadMark {
  double wall = 0, busy = 0, steal = 0, self = 0;
  int cores = 0;
  bool valid = false;  // /proc/stat was readable
};
CpuLoadMark cpu_load_mark();

// The share of the cores' time between `a` and `b` that other processes used: 0 on an otherwise
// idle host, 1 when they kept every core busy (clamped to [0, 1]). NaN when either mark is
// invalid or no wall time passed.
double other_cpu_share(const CpuLoadMark& a, const CpuLoadMark& b);

// The share of the cores' time between `a` and `b` that the hypervisor gave to other guests
// while this one's virtual CPUs wanted to run (/proc/stat's steal; part of other_cpu_share):
// 0 on bare metal or an uncontended virtual machine. Clamped to [0, 1]; NaN as other_cpu_share.
double steal_share(const CpuLoadMark& a, const CpuLoadMark& b);

// The 1-minute load average divided by the online cores; NaN when /proc/loadavg is unreadable.
double load_per_core();

}  // namespace lj
