// Google Benchmark entry point for the model/ microbenchmarks.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
