// tern-hostile-rng: a hostile virtio-rng (entropy, virtio 1.2 §5.4) driver in guest user space, for
// tests/e2e/rng_test.sh. Drives the virtio-rng PCI function BDF (modern; unbound from virtio-pci)
// through virtio_user.h. Each phase starts from a device reset and a fresh queue 0, posts one
// chain (or ring state) and waits up to TIMEOUT seconds for the device's reaction:
//   good       one device-writable 4 KiB buffer (the control: must be answered with random bytes)
//   readonly   one device-readable 4 KiB buffer only (nothing the device may write)
//   zerolen    one device-writable buffer of length 0
//   loop       two writable descriptors whose NEXT fields point at each other
//   badnext    a NEXT field past the queue size
//   badhead    an avail ring entry (chain head) past the queue size
//   oob        a writable buffer at 1 TiB (outside guest RAM)
//   overflow   a writable buffer at 2^64 - 4 KiB of 8 KiB (address + length wraps)
//   huge       a writable buffer of 0xffffffff bytes starting in a 2 MiB hugepage (runs past RAM)
//   indirect   VIRTQ_DESC_F_INDIRECT, which this driver did not negotiate
//   jump       avail idx moved by queue size + 1 (more chains than the ring holds)
//   good-again the control once more, after all of the above
// and prints for each
//   TERN-HOSTILE-RNG phase=<p> result=answered|needs_reset|pending used_len=<n> distinct=<d> status=0x<s> ms=<t>
// (answered: a used element came back, used_len its length, distinct the number of different byte
// values in what the device wrote to the buffer; needs_reset: the device set DEVICE_NEEDS_RESET or
// FAILED; pending: neither within TIMEOUT; t: milliseconds from the kick to that). Then it
// resets the device and prints
//   TERN-HOSTILE-RNG-DONE phases=<n>
// The spec-conforming reactions are "answered" (with used_len 0 when nothing could be written) and
// "needs_reset" (virtio 1.2 §2.1.2); a device that keeps a malformed chain forever shows "pending".
// Usage: tern-hostile-rng BDF [TIMEOUT]   (static: gcc -static -O2)
#include "virtio_user.h"

static uint8_t* data;   // 4 KiB the device may write
static uint8_t* table;  // an indirect table
static uint8_t* hp;     // a 2 MiB hugepage, or NULL
static unsigned timeout_s = 20;

static unsigned distinct(const uint8_t* p, size_t n) {
  unsigned seen[256] = {0}, d = 0;
  for (size_t i = 0; i < n; ++i)
    if (!seen[p[i]]++) ++d;
  return d;
}

static struct timespec t0;  // when the phase's chain was published

static void start_clock(void) { clock_gettime(CLOCK_MONOTONIC, &t0); }

static void report(const char* phase, enum vu_outcome o) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  uint32_t id = 0, len = 0;
  if (o == VU_USED) vu_used_elem((uint16_t)(used_seen - 1), &id, &len);
  unsigned d = o == VU_USED && len > 0 && len <= PAGE ? distinct(data, len) : 0;
  printf("TERN-HOSTILE-RNG phase=%s result=%s used_len=%u distinct=%u status=0x%x ms=%ld\n", phase,
         o == VU_USED ? "answered" : o == VU_NEEDS_RESET ? "needs_reset" : "pending", len, d,
         vu_status(), ms);
}

// Fresh queue, descriptors d[0..n) copied into the table, head 0 made available and kicked.
static void run(const char* phase, const struct desc* d, unsigned n, uint16_t head) {
  vu_init_queue(0, 1024);
  memset(data, 0, PAGE);
  for (unsigned i = 0; i < n && i < qsz; ++i) ring_desc[i] = d[i];
  vu_add(head);
  start_clock();
  vu_publish(avail_idx);
  report(phase, vu_wait(1, timeout_s));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) die("usage: tern-hostile-rng BDF [TIMEOUT]");
  if (argc > 2) timeout_s = (unsigned)atoi(argv[2]);
  vu_open(argv[1]);
  data = pages(1);
  table = pages(1);
  hp = huge_page();
  vu_init_queue(0, 1024);
  printf("TERN-HOSTILE-RNG-READY bdf=%s qsz=%u hugepage=%d\n", argv[1], qsz, hp != NULL);
  unsigned phases = 0;
  const uint64_t buf = phys(data);

  struct desc good = {buf, PAGE, DESC_F_WRITE, 0};
  run("good", &good, 1, 0), ++phases;
  struct desc ro = {buf, PAGE, 0, 0};
  run("readonly", &ro, 1, 0), ++phases;
  struct desc zero = {buf, 0, DESC_F_WRITE, 0};
  run("zerolen", &zero, 1, 0), ++phases;
  struct desc loop[2] = {{buf, 64, DESC_F_WRITE | DESC_F_NEXT, 1}, {buf + 64, 64, DESC_F_WRITE | DESC_F_NEXT, 0}};
  run("loop", loop, 2, 0), ++phases;
  struct desc badnext = {buf, 64, DESC_F_WRITE | DESC_F_NEXT, 0};
  vu_init_queue(0, 1024);  // learn the queue size for the out-of-range index
  badnext.next = (uint16_t)(qsz + 3);
  run("badnext", &badnext, 1, 0), ++phases;
  run("badhead", &good, 1, (uint16_t)(qsz + 1)), ++phases;
  struct desc oob = {1ull << 40, PAGE, DESC_F_WRITE, 0};
  run("oob", &oob, 1, 0), ++phases;
  struct desc ovf = {~0ull - PAGE + 1, 2 * PAGE, DESC_F_WRITE, 0};
  run("overflow", &ovf, 1, 0), ++phases;
  if (hp) {
    struct desc huge = {phys(hp), 0xffffffffu, DESC_F_WRITE, 0};
    run("huge", &huge, 1, 0), ++phases;
  } else {
    printf("TERN-HOSTILE-RNG phase=huge result=skipped used_len=0 distinct=0 status=0x0 (no hugepage)\n");
  }
  struct desc* t = (struct desc*)table;
  t[0] = (struct desc){buf, PAGE, DESC_F_WRITE, 0};
  struct desc ind = {phys(table), 16, DESC_F_INDIRECT, 0};
  run("indirect", &ind, 1, 0), ++phases;

  // jump: the ring claims qsz + 1 new chains (all heads 0, a good buffer).
  vu_init_queue(0, 1024);
  memset(data, 0, PAGE);
  ring_desc[0] = good;
  start_clock();
  vu_publish((uint16_t)(qsz + 1));
  report("jump", vu_wait(1, timeout_s)), ++phases;

  run("good-again", &good, 1, 0), ++phases;
  vu_reset();
  printf("TERN-HOSTILE-RNG-DONE phases=%u\n", phases);
  return 0;
}
