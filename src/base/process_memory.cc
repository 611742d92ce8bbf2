#include "base/process_memory.h"

#include <malloc.h>
#include <pthread.h>

namespace tern {

bool tune_process_memory() {
  // Setting either threshold explicitly also turns off glibc's dynamic adjustment of both.
  bool ok = ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocMmapThresholdBytes)) == 1;
  ok = ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMallocTrimThresholdBytes)) == 1 && ok;
  ok = ::mallopt(M_ARENA_MAX, kMallocArenaMax) == 1 && ok;
  pthread_attr_t attr;
  if (::pthread_attr_init(&attr) != 0) return false;
  ok = ::pthread_attr_setstacksize(&attr, kThreadStackBytes) == 0 && ok;
  ok = ::pthread_setattr_default_np(&attr) == 0 && ok;
  ::pthread_attr_destroy(&attr);
  return ok;
}

}  // namespace tern
