// tern-hostile-blk: a hostile virtio-blk driver in guest user space, for tests/e2e/disk_test.sh.
// Drives a virtio-blk PCI function (modern, virtio 1.x) that no kernel driver owns: maps its BAR
// through /sys/bus/pci/devices/BDF/resourceN, finds guest-physical addresses of mlocked buffers
// through /proc/self/pagemap, sets up queue 0 itself (polled, no interrupts) and posts only WRITE
// requests (the device reads guest memory; READs to wild addresses would corrupt the guest):
//   limits: one data descriptor of size_max + 512 bytes; seg_max + 1 data segments; a small
//           request within the limits (statuses expected: 1 = IOERR, 1, 0);
//   budget: N chains of 16 descriptors x 64 KiB, all aliasing one buffer at an odd address
//           (1 MiB each, all in flight at once; under cache=none each one is bounced).
// Prints TERN-HOSTILE-READY once set up, waits for a line on /dev/console (the host reads tern's
// memory then), runs both phases and prints their statuses:
//   TERN-HOSTILE limits sizemax=<s> segmax=<s> small=<s>
//   TERN-HOSTILE budget requests=<n> ok=<n> ioerr=<n> other=<n>
//   TERN-HOSTILE-DONE
// Usage: tern-hostile-blk BDF [N]   (static: gcc -static -O2)
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u
#define HUGE (2u << 20)
#define DESC_F_NEXT 1
#define DESC_F_WRITE 2
#define DESC_F_INDIRECT 4

static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("TERN-HOSTILE-ERROR ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  exit(1);
}

static int pagemap_fd = -1;
static uint64_t phys(const void* p) {
  uint64_t e = 0;
  off_t off = (off_t)((uintptr_t)p / PAGE) * 8;
  if (pread(pagemap_fd, &e, 8, off) != 8) die("pagemap read");
  if (!(e >> 63)) die("page %p not present", p);
  uint64_t pfn = e & ((1ull << 55) - 1);
  if (pfn == 0) die("pagemap gives no PFN (need CAP_SYS_ADMIN)");
  return pfn * PAGE + (uintptr_t)p % PAGE;
}

static void* pages(size_t n) {
  void* p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || mlock(p, n * PAGE) != 0) die("mmap/mlock %zu pages", n);
  memset(p, 0, n * PAGE);
  return p;
}

// --- the device ---
static volatile uint8_t* common;  // virtio_pci_common_cfg
static volatile uint8_t* devcfg;  // virtio_blk_config
static volatile uint8_t* notify;  // queue 0's doorbell
static unsigned g_mult;           // notify_off_multiplier
#define C8(o) (*(volatile uint8_t*)(common + (o)))
#define C16(o) (*(volatile uint16_t*)(common + (o)))
#define C32(o) (*(volatile uint32_t*)(common + (o)))

static void c64(unsigned o, uint64_t v) {
  C32(o) = (uint32_t)v;
  C32(o + 4) = (uint32_t)(v >> 32);
}

static void setup_bars(const char* bdf) {
  char path[256];
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/config", bdf);
  int cfd = open(path, O_RDWR);
  if (cfd < 0) die("open %s", path);
  uint8_t cfg[256];
  if (pread(cfd, cfg, sizeof cfg, 0) != (ssize_t)sizeof cfg) die("read config (need root)");
  uint16_t cmd = (uint16_t)(cfg[4] | cfg[5] << 8);
  cmd |= 0x406;  // memory space + bus master + INTx disable (we poll; no handler for the line)
  if (pwrite(cfd, &cmd, 2, 4) != 2) die("write command");
  volatile uint8_t* bars[6] = {0};
  unsigned notify_mult = 0, notify_bar = 0, notify_off = 0;
  unsigned common_bar = 9, common_off = 0, dev_bar = 9, dev_off = 0;
  for (unsigned p = cfg[0x34]; p != 0 && p < 0xfc; p = cfg[p + 1]) {
    if (cfg[p] != 0x09) continue;  // vendor-specific: virtio_pci_cap
    unsigned type = cfg[p + 3], bar = cfg[p + 4];
    uint32_t off;
    memcpy(&off, cfg + p + 8, 4);
    if (bar > 5) continue;
    if (type == 1) common_bar = bar, common_off = off;
    if (type == 4) dev_bar = bar, dev_off = off;
    if (type == 2) notify_bar = bar, notify_off = off, memcpy(&notify_mult, cfg + p + 16, 4);
    if ((type == 1 || type == 2 || type == 4) && !bars[bar]) {
      snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/resource%u", bdf, bar);
      int fd = open(path, O_RDWR | O_SYNC);
      struct stat st;
      if (fd < 0 || fstat(fd, &st) != 0) die("open %s", path);
      void* m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m == MAP_FAILED) die("mmap %s", path);
      bars[bar] = m;
    }
  }
  if (common_bar > 5 || dev_bar > 5) die("no virtio common/device capability");
  common = bars[common_bar] + common_off;
  devcfg = bars[dev_bar] + dev_off;
  notify = bars[notify_bar] + notify_off;  // + queue_notify_off * g_mult, in init_queue()
  g_mult = notify_mult;
  close(cfd);
}

struct desc {
  uint64_t addr;
  uint32_t len;
  uint16_t flags, next;
};
static struct desc* ring_desc;
static volatile uint16_t* avail;  // flags, idx, ring[]
static volatile uint8_t* used;    // flags, idx, ring[] of {u32 id, u32 len}
static uint16_t qsz, avail_idx, used_seen;

static void init_queue(void) {
  C8(0x14) = 0;  // reset
  while (C8(0x14) != 0) {
  }
  C8(0x14) = 1 | 2;  // ACKNOWLEDGE | DRIVER
  C32(0x00) = 1;
  uint32_t hi = C32(0x04);
  if (!(hi & 1)) die("no VIRTIO_F_VERSION_1");
  C32(0x08) = 0;
  C32(0x0c) = 1u << 28;  // VIRTIO_F_INDIRECT_DESC
  C32(0x08) = 1;
  C32(0x0c) = 1;  // VIRTIO_F_VERSION_1
  C8(0x14) = 1 | 2 | 8;
  if (!(C8(0x14) & 8)) die("FEATURES_OK refused");
  C16(0x16) = 0;
  qsz = C16(0x18);
  if (qsz == 0 || qsz > 256) die("queue size %u", qsz);
  C16(0x1a) = 0xffff;  // no MSI-X vector: we poll
  ring_desc = pages(1);
  avail = pages(1);
  used = pages(1);
  avail[0] = 1;  // VIRTQ_AVAIL_F_NO_INTERRUPT
  c64(0x20, phys(ring_desc));
  c64(0x28, phys((void*)avail));
  c64(0x30, phys((void*)used));
  unsigned noff = C16(0x1e);
  notify += noff * g_mult;
  C16(0x1c) = 1;
  C8(0x14) = 1 | 2 | 8 | 4;  // DRIVER_OK
}

static uint8_t* hdrs;      // 16 bytes per request at [i*16]; a 528-byte header+data at 0x800
static uint8_t* statuses;  // one byte per request
static uint8_t* tables;    // one 4 KiB indirect table per request
static uint8_t* buf;       // 2 MiB, physically contiguous (hugepage) or one page
static size_t buf_len;

// Request r (its own header, table, status): header + the data descriptors + status.
static void post(unsigned r, uint64_t sector, const uint64_t* addr, const uint32_t* len,
                 unsigned n, int header_carries_data) {
  struct desc* t = (struct desc*)(tables + (size_t)r * PAGE);
  uint8_t* h = header_carries_data ? hdrs + 0x800 : hdrs + r * 16;
  uint32_t type = 1;  // VIRTIO_BLK_T_OUT
  memcpy(h, &type, 4);
  memset(h + 4, 0, 4);
  memcpy(h + 8, &sector, 8);
  unsigned k = 0;
  t[k++] = (struct desc){phys(h), header_carries_data ? 16 + 512 : 16, DESC_F_NEXT, 1};
  for (unsigned i = 0; i < n; ++i, ++k) t[k] = (struct desc){addr[i], len[i], DESC_F_NEXT, (uint16_t)(k + 1)};
  statuses[r] = 0xff;
  t[k++] = (struct desc){phys(statuses + r), 1, DESC_F_WRITE, 0};
  if (k > qsz) die("table of %u entries > queue size %u", k, qsz);
  uint16_t d = (uint16_t)(r % qsz);
  ring_desc[d] = (struct desc){phys(t), k * 16, DESC_F_INDIRECT, 0};
  avail[2 + avail_idx % qsz] = d;
  ++avail_idx;
}

static void kick_and_wait(unsigned n) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  avail[1] = avail_idx;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  *(volatile uint16_t*)notify = 0;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  uint16_t want = (uint16_t)(used_seen + n);
  while (*(volatile uint16_t*)(used + 2) != want) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 300) die("timeout: used idx %u, want %u", *(volatile uint16_t*)(used + 2), want);
    usleep(1000);  // polling a device ring; no interrupts are set up
  }
  used_seen = want;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) die("usage: tern-hostile-blk BDF [requests]");
  unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 64;
  pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
  if (pagemap_fd < 0) die("open pagemap");
  setup_bars(argv[1]);
  init_queue();
  uint32_t size_max = *(volatile uint32_t*)(devcfg + 8), seg_max = *(volatile uint32_t*)(devcfg + 12);
  uint64_t capacity = *(volatile uint64_t*)(devcfg + 0);
  if (n + 3 > qsz || n > 128) die("too many requests %u for queue size %u", n, qsz);
  if (capacity < (uint64_t)n * 2048) die("disk too small: %llu sectors", (unsigned long long)capacity);
  hdrs = pages(1);
  statuses = pages(1);
  tables = pages(n + 3);
  buf = mmap(NULL, HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (buf != MAP_FAILED && mlock(buf, HUGE) == 0) {
    memset(buf, 0x5a, HUGE);
    buf_len = HUGE;
    if (phys(buf + HUGE - 1) != phys(buf) + HUGE - 1) die("hugepage not contiguous");
  } else {
    buf = pages(1);
    memset(buf, 0x5a, PAGE);
    buf_len = PAGE;
  }
  printf("TERN-HOSTILE-READY qsz=%u size_max=%u seg_max=%u capacity=%llu buf=%zu\n", qsz, size_max,
         seg_max, (unsigned long long)capacity, buf_len);
  int con = open("/dev/console", O_RDONLY);
  char line[64];
  if (con < 0 || read(con, line, sizeof line) <= 0) die("no go line on /dev/console");

  // Limits: each answered IOERR before any I/O or bounce.
  uint64_t odd = phys(buf) + 1;
  static uint64_t a[256];
  static uint32_t l[256];
  unsigned r = 0;
  int sizemax_ok = buf_len > (size_t)size_max + 513;
  if (sizemax_ok) {
    a[0] = odd, l[0] = size_max + 512;
    post(r++, 0, a, l, 1, 0);
  }
  unsigned segs = seg_max < qsz - 2u ? seg_max : qsz - 2u;  // + header-with-data: seg_max + 1 pieces
  for (unsigned i = 0; i < segs; ++i) a[i] = odd, l[i] = 512;
  post(r++, 0, a, l, segs, 1);
  a[0] = odd, l[0] = 4096;
  post(r++, 0, a, l, 1, 0);
  kick_and_wait(r);
  printf("TERN-HOSTILE limits sizemax=%d segmax=%d small=%d\n", sizemax_ok ? statuses[0] : -1,
         statuses[r - 2], statuses[r - 1]);

  // Budget: n requests of 16 x 64 KiB (or 16 x 2 KiB without a hugepage) aliasing `odd`.
  uint32_t piece = buf_len == HUGE ? 64 * 1024 : 2048;
  for (unsigned i = 0; i < 16; ++i) a[i] = odd, l[i] = piece;
  for (unsigned i = 0; i < n; ++i) post(3 + i, (uint64_t)i * 2048, a, l, 16, 0);
  kick_and_wait(n);
  unsigned ok = 0, ioerr = 0, other = 0;
  for (unsigned i = 0; i < n; ++i) {
    uint8_t s = statuses[3 + i];
    s == 0 ? ++ok : s == 1 ? ++ioerr : ++other;
  }
  printf("TERN-HOSTILE budget requests=%u bytes=%u ok=%u ioerr=%u other=%u\n", n, 16 * piece, ok,
         ioerr, other);
  C8(0x14) = 0;  // reset the device: it forgets the queue
  printf("TERN-HOSTILE-DONE\n");
  return 0;
}
