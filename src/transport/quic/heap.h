#pragma once

#include <ngtcp2/ngtcp2.h>

#include <cstdint>

namespace moqd::transport::quic {

// What ngtcp2 holds on the heap, for /stats and `moq bench fanout`: every Connection hands
// ngtcp2 counting_mem(), so a viewer's ngtcp2 share (its pools, skip lists, the connection
// struct) can be read at 1,000 viewers, where heaptrack is too slow to run. The blocks come from
// malloc as before; only the count is added.
struct HeapCount {
  uint64_t bytes = 0;   // malloc_usable_size of every live block (glibc), else the bytes asked for
  uint64_t blocks = 0;  // live blocks
};

// The allocator to pass to ngtcp2_conn_{client,server}_new. Safe from any thread: each thread
// counts into a slot of its own (no lock, no atomic read-modify-write), which ngtcp2_heap() sums.
// A block freed on another thread than the one that allocated it is counted there; the sum stays
// exact.
const ngtcp2_mem* counting_mem();

// The live total over all threads. Reads other threads' slots with relaxed loads: a snapshot that
// may be a few blocks stale while they allocate.
HeapCount ngtcp2_heap();

}  // namespace moqd::transport::quic
