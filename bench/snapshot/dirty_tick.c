// dirty-tick: the guest (L2) program of bench/snapshot (built static by run.sh, /bin/dirty-tick in
// the guest initramfs). Usage: dirty-tick MIB
// Allocates MIB MiB of anonymous memory and fills every byte with xorshift64* output seeded from
// /dev/urandom (random, non-repeating data: no VMM can skip or deduplicate those pages; the guest's
// /dev/urandom itself only makes ~5 MiB/s in the nested test host), keeps it resident, prints
//   SNAP-DIRTY-DONE mib=N seconds=S
// and then a tick line every 10 ms of CLOCK_MONOTONIC, forever:
//   TICK n          n = 1, 2, 3, ...
// so that the first new TICK after a restore shows the guest's user space running again.
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dirty-tick MIB\n");
    return 2;
  }
  size_t mib = strtoull(argv[1], NULL, 10);
  size_t bytes = mib << 20;
  uint64_t seed = 0;
  int fd = open("/dev/urandom", O_RDONLY);
  if (fd < 0 || read(fd, &seed, sizeof seed) != (ssize_t)sizeof seed) {
    printf("SNAP-ERROR cannot read /dev/urandom\n");
    seed = (uint64_t)time(NULL);
  }
  if (fd >= 0) close(fd);
  seed |= 1;
  double t0 = now_s();
  if (bytes > 0) {
    uint64_t* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      printf("SNAP-ERROR cannot map %zu MiB\n", mib);
    } else {
      for (size_t i = 0; i < bytes / sizeof *p; i++) {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        p[i] = seed * 0x2545F4914F6CDD1DULL;
      }
      mlock(p, bytes);  // best effort: keep it resident (there is no swap anyway)
    }
  }
  printf("SNAP-DIRTY-DONE mib=%zu seconds=%.2f\n", mib, now_s() - t0);
  fflush(stdout);
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (unsigned long n = 1;; n++) {
    printf("TICK %lu\n", n);
    fflush(stdout);
    next.tv_nsec += 10 * 1000 * 1000;
    if (next.tv_nsec >= 1000000000L) {
      next.tv_nsec -= 1000000000L;
      next.tv_sec++;
    }
    // Absolute deadlines keep a 10 ms period; after a long stop the missed deadlines pass at once,
    // so restart from now rather than printing a burst.
    struct timespec cur;
    clock_gettime(CLOCK_MONOTONIC, &cur);
    if (cur.tv_sec > next.tv_sec + 1) next = cur;
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
  }
}
