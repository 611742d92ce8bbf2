#include "base/process_memory.h"

#include <malloc.h>
#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

namespace tern {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define TERN_OWN_MALLOC 0  // ASan replaces malloc: mallopt and mallinfo2 describe nothing
#else
#define TERN_OWN_MALLOC 1
#endif

void* keep(void* p) {
  asm volatile("" : : "r"(p) : "memory");  // the allocation is observable: not elided
  return p;
}

// The kernel image case: a big buffer freed, then the next one (initrd, payload copy). With glibc's
// dynamic threshold the second would come from the heap and stay resident once freed.
TEST(ProcessMemory, BigBlocksAreMmappedEvenAfterOneWasFreed) {
  if (!TERN_OWN_MALLOC) GTEST_SKIP() << "sanitizer malloc";
  ASSERT_TRUE(tune_process_memory());
  // glibc serves a request from a free heap chunk (or the top) before it considers mmap, whatever
  // the threshold: earlier tests in this process may have left MiBs free in the heap (tern calls
  // tune_process_memory first, before any big block). A block bigger than all free heap memory
  // can only be mmapped.
  struct mallinfo2 before = ::mallinfo2();
  const size_t kBig = std::max<size_t>(8 << 20, before.fordblks + (1 << 20));
  void* a = keep(std::malloc(kBig));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(::mallinfo2().hblks, before.hblks + 1);
  std::free(a);
  void* b = keep(std::malloc(kBig));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(::mallinfo2().hblks, before.hblks + 1);  // mmapped again, not carved from the heap
  std::free(b);
  EXPECT_EQ(::mallinfo2().hblkhd, before.hblkhd);  // and given back
}

TEST(ProcessMemory, NewThreadsGetStacksTooSmallForAHugePage) {
  ASSERT_TRUE(tune_process_memory());
  size_t size = 0;
  std::thread t([&size] {
    pthread_attr_t attr;
    ASSERT_EQ(::pthread_getattr_np(::pthread_self(), &attr), 0);
    ::pthread_attr_getstacksize(&attr, &size);
    ::pthread_attr_destroy(&attr);
  });
  t.join();
  EXPECT_GE(size, kThreadStackBytes - (64 << 10));
  EXPECT_LT(size, size_t{2} << 20);  // 2 MiB: the transparent huge page size
}

}  // namespace
}  // namespace tern
