// glibc malloc settings for single-process training, which allocates and frees hundreds of MB
// per batch (the input rows of one batch of synthetic-1M are up to 137 MB).
#pragma once

#include <malloc.h>

namespace degnn {

/// By default glibc gives free memory at the top of the heap back to the system once more than a
/// threshold (128 KiB, raised up to 64 MiB as it sees large blocks) is free there, so every batch
/// faults the same pages in again. Keeping up to 1 GiB, growing the heap 256 MiB at a time, and one
/// arena (so that the prefetching thread's batches come from the same kept heap), measured on
/// 2 cores with `degnn bench train`: serial epoch 6.42 -> 3.30 s, prefetched 6.42 -> 4.27 s
/// (the same with MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_ and MALLOC_ARENA_MAX set from outside).
/// The process's resident memory then stays near its peak instead of shrinking between batches.
/// Call it before the process starts its threads.
inline void keep_freed_heap() {
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace degnn
