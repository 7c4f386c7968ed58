// glibc malloc settings for training, which allocates and frees hundreds of MB per batch or step
// (the input rows of one batch of synthetic-1M are up to 137 MB). Set once, at the start of main.
#pragma once

#include <malloc.h>

namespace degnn {

/// By default glibc gives free memory at the top of the heap back to the system once more than a
/// threshold (128 KiB, raised up to 64 MiB as it sees large blocks) is free there, and serves
/// blocks above the mmap threshold (at most 32 MiB) with mmap, unmapped again on free: so every
/// batch faults the same pages in again. Keeping up to 1 GiB, growing the heap 256 MiB at a time,
/// one arena (so that one thread's freed blocks serve another's), and no mmap at all, measured on
/// 2 cores:
///   `degnn bench train` (one process): serial epoch 6.42 -> 3.30 s, prefetched 6.42 -> 4.27 s
///   (without the mmap setting; with it, 30 batches 0.78 -> 0.77 s: the same);
///   4 in-process shards of synthetic-1M, 3 layers, 5 steps: centralized 8.47 -> 4.93 s,
///   decentralized 4.71 -> 3.67 s (page faults were a third of the decentralized profile).
/// The same can be set from outside (MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, MALLOC_ARENA_MAX,
/// MALLOC_MMAP_MAX_). The process's resident memory then stays near its peak instead of
/// shrinking between batches. Call it before the process starts its threads.
inline void keep_freed_heap() {
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
}

}  // namespace degnn
