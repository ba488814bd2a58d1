// The micro-benchmark binary's entry point. Every bench/micro/*.cc registers its benchmarks;
// only this file defines main.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
