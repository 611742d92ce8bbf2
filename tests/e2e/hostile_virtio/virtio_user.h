// virtio_user.h: a polled virtio 1.x PCI driver in guest user space, shared by the hostile drivers
// (hostile_blk.c for tests/e2e/disk_test.sh, hostile_rng.c for tests/e2e/rng_test.sh, hostile_net.c
// for tests/e2e/net_hostile_test.sh). It drives a modern virtio-pci function that no kernel driver
// owns (unbind it from virtio-pci first): maps its BARs through /sys/bus/pci/devices/BDF/resourceN
// (virtio 1.2 §4.1.4: common, notify and device capabilities), finds guest-physical addresses of
// mlocked buffers through /proc/self/pagemap, and sets up split virtqueues (§2.7) itself, without
// interrupts (the driver polls the used rings and the device status): any number of queues with
// vu_negotiate() + vu_queue_setup() + vu_driver_ok() and the vu_q_* calls, or just queue 0 with
// vu_init_queue() and the calls on its globals. Header only (static functions): each driver is one
// `gcc -static` of its .c file. Errors print "TERN-HOSTILE-ERROR <what>" and exit 1.
#pragma once
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

// Device status bits (virtio 1.2 §2.1).
#define VU_S_ACKNOWLEDGE 1
#define VU_S_DRIVER 2
#define VU_S_DRIVER_OK 4
#define VU_S_FEATURES_OK 8
#define VU_S_NEEDS_RESET 0x40
#define VU_S_FAILED 0x80

// virtio_pci_common_cfg offsets (§4.1.4.3).
#define VU_DFSELECT 0x00
#define VU_DF 0x04
#define VU_GFSELECT 0x08
#define VU_GF 0x0c
#define VU_STATUS 0x14
#define VU_Q_SELECT 0x16
#define VU_Q_SIZE 0x18
#define VU_Q_MSIX 0x1a
#define VU_Q_ENABLE 0x1c
#define VU_Q_NOTIFY_OFF 0x1e
#define VU_Q_DESC 0x20
#define VU_Q_AVAIL 0x28
#define VU_Q_USED 0x30

static inline void die(const char* fmt, ...) {
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

// Guest-physical address of a present, locked byte of this process.
static inline uint64_t phys(const void* p) {
  if (pagemap_fd < 0) pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
  if (pagemap_fd < 0) die("open pagemap");
  uint64_t e = 0;
  off_t off = (off_t)((uintptr_t)p / PAGE) * 8;
  if (pread(pagemap_fd, &e, 8, off) != 8) die("pagemap read");
  if (!(e >> 63)) die("page %p not present", p);
  uint64_t pfn = e & ((1ull << 55) - 1);
  if (pfn == 0) die("pagemap gives no PFN (need CAP_SYS_ADMIN)");
  return pfn * PAGE + (uintptr_t)p % PAGE;
}

// n zeroed, mlocked pages (each physically contiguous; not contiguous with each other).
static inline void* pages(size_t n) {
  void* p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || mlock(p, n * PAGE) != 0) die("mmap/mlock %zu pages", n);
  memset(p, 0, n * PAGE);
  return p;
}

// One 2 MiB hugepage (physically contiguous), or NULL when none is reserved (vm.nr_hugepages).
static inline uint8_t* huge_page(void) {
  void* p = mmap(NULL, HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p == MAP_FAILED || mlock(p, HUGE) != 0) return NULL;
  memset(p, 0, HUGE);
  if (phys((uint8_t*)p + HUGE - 1) != phys(p) + HUGE - 1) die("hugepage not contiguous");
  return p;
}

// --- the device ---
static volatile uint8_t* common;  // virtio_pci_common_cfg
static volatile uint8_t* devcfg;  // device-specific configuration (NULL if the device has none)
static volatile uint8_t* notify;  // queue 0's doorbell, once vu_init_queue() ran
static volatile uint8_t* notify_base;
static unsigned g_mult;  // notify_off_multiplier
#define C8(o) (*(volatile uint8_t*)(common + (o)))
#define C16(o) (*(volatile uint16_t*)(common + (o)))
#define C32(o) (*(volatile uint32_t*)(common + (o)))

static inline void c64(unsigned o, uint64_t v) {
  C32(o) = (uint32_t)v;
  C32(o + 4) = (uint32_t)(v >> 32);
}

// Maps the common, notify and device capabilities of PCI function BDF; enables memory space and
// bus mastering with INTx disabled (we poll; no handler for the line).
static inline void vu_open(const char* bdf) {
  char path[256];
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/config", bdf);
  int cfd = open(path, O_RDWR);
  if (cfd < 0) die("open %s", path);
  uint8_t cfg[256];
  if (pread(cfd, cfg, sizeof cfg, 0) != (ssize_t)sizeof cfg) die("read config (need root)");
  uint16_t cmd = (uint16_t)(cfg[4] | cfg[5] << 8);
  cmd |= 0x406;  // memory space + bus master + INTx disable
  if (pwrite(cfd, &cmd, 2, 4) != 2) die("write command");
  volatile uint8_t* bars[6] = {0};
  unsigned notify_mult = 0, notify_bar = 9, notify_off = 0;
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
  if (common_bar > 5 || notify_bar > 5) die("no virtio common/notify capability");
  common = bars[common_bar] + common_off;
  devcfg = dev_bar <= 5 ? bars[dev_bar] + dev_off : NULL;
  notify_base = bars[notify_bar] + notify_off;
  g_mult = notify_mult;
  close(cfd);
}

static inline uint8_t vu_status(void) { return C8(VU_STATUS); }

// Device reset (§2.4): write 0, wait until the device reads back 0.
static inline void vu_reset(void) {
  C8(VU_STATUS) = 0;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (C8(VU_STATUS) != 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 60) die("device status stays 0x%x after reset", C8(VU_STATUS));
    usleep(1000);
  }
}

// --- virtqueues (split, §2.7) ---
struct desc {
  uint64_t addr;
  uint32_t len;
  uint16_t flags, next;
};

// One split virtqueue of the device, polled. Each ring lives in one page (so size <= 256).
struct vu_queue {
  struct desc* desc;
  volatile uint16_t* avail;  // flags, idx, ring[], used_event
  volatile uint8_t* used;    // flags, idx, ring[] of {u32 id, u32 len}, avail_event
  volatile uint8_t* notify;  // this queue's doorbell
  uint16_t index, size, avail_idx, used_seen;
};

// The device's feature bits (all 64).
static inline uint64_t vu_device_features(void) {
  C32(VU_DFSELECT) = 0;
  uint64_t lo = C32(VU_DF);
  C32(VU_DFSELECT) = 1;
  return lo | (uint64_t)C32(VU_DF) << 32;
}

// Resets the device, acknowledges it and writes driver features `want` & the device's features
// (VIRTIO_F_VERSION_1, bit 32, always: the device must offer it), then sets FEATURES_OK and checks
// that the device kept it (§3.1.1). Returns the features written.
static inline uint64_t vu_negotiate(uint64_t want) {
  vu_reset();
  C8(VU_STATUS) = VU_S_ACKNOWLEDGE | VU_S_DRIVER;
  uint64_t dev = vu_device_features();
  if (!(dev >> 32 & 1)) die("no VIRTIO_F_VERSION_1");
  uint64_t f = (want & dev) | 1ull << 32;
  C32(VU_GFSELECT) = 0;
  C32(VU_GF) = (uint32_t)f;
  C32(VU_GFSELECT) = 1;
  C32(VU_GF) = (uint32_t)(f >> 32);
  C8(VU_STATUS) = VU_S_ACKNOWLEDGE | VU_S_DRIVER | VU_S_FEATURES_OK;
  if (!(C8(VU_STATUS) & VU_S_FEATURES_OK)) die("FEATURES_OK refused (features 0x%llx)", (unsigned long long)f);
  return f;
}

// Sets up queue `index` between vu_negotiate() and vu_driver_ok(): at most max_size entries (a
// power of two <= 256; a larger device maximum is lowered by writing queue_size, §4.1.4.3), no
// MSI-X vector (polled), zeroed rings (allocated on the first call for q), avail and used indexes
// at 0, VIRTQ_AVAIL_F_NO_INTERRUPT set, queue_enable written. Dies if the queue does not exist.
static inline void vu_queue_setup(struct vu_queue* q, uint16_t index, uint16_t max_size) {
  C16(VU_Q_SELECT) = index;
  uint16_t size = C16(VU_Q_SIZE);
  if (size == 0) die("queue %u does not exist", index);
  if (size > max_size) C16(VU_Q_SIZE) = size = max_size;
  if (size > 256 || (size & (size - 1))) die("queue %u: size %u (want a power of two <= 256)", index, size);
  C16(VU_Q_MSIX) = 0xffff;  // no MSI-X vector: we poll
  if (!q->desc) {
    q->desc = pages(1);
    q->avail = pages(1);
    q->used = pages(1);
  }
  memset(q->desc, 0, PAGE);
  memset((void*)q->avail, 0, PAGE);
  memset((void*)q->used, 0, PAGE);
  q->index = index;
  q->size = size;
  q->avail_idx = q->used_seen = 0;
  q->avail[0] = 1;  // VIRTQ_AVAIL_F_NO_INTERRUPT
  c64(VU_Q_DESC, phys(q->desc));
  c64(VU_Q_AVAIL, phys((void*)q->avail));
  c64(VU_Q_USED, phys((void*)q->used));
  q->notify = notify_base + C16(VU_Q_NOTIFY_OFF) * g_mult;
  C16(VU_Q_ENABLE) = 1;
}

// DRIVER_OK after vu_negotiate() and the vu_queue_setup() calls.
static inline void vu_driver_ok(void) {
  C8(VU_STATUS) = VU_S_ACKNOWLEDGE | VU_S_DRIVER | VU_S_FEATURES_OK | VU_S_DRIVER_OK;
}

// Puts descriptor head d into q's next avail ring slot (not yet published).
static inline void vu_q_add(struct vu_queue* q, uint16_t d) {
  q->avail[2 + q->avail_idx % q->size] = d;
  ++q->avail_idx;
}

// Publishes avail idx `idx` (normally q->avail_idx) and rings q's doorbell (the queue index, as
// without VIRTIO_F_NOTIFICATION_DATA, §4.1.5.2).
static inline void vu_q_publish(struct vu_queue* q, uint16_t idx) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  q->avail[1] = idx;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  *(volatile uint16_t*)q->notify = q->index;
}

static inline uint16_t vu_q_used_idx(const struct vu_queue* q) { return *(volatile uint16_t*)(q->used + 2); }

// Used ring element i (mod queue size): descriptor id and written length.
static inline void vu_q_used_elem(const struct vu_queue* q, uint16_t i, uint32_t* id, uint32_t* len) {
  volatile uint32_t* e = (volatile uint32_t*)(q->used + 4 + 8u * (i % q->size));
  *id = e[0];
  *len = e[1];
}

enum vu_outcome { VU_USED = 0, VU_NEEDS_RESET = 1, VU_TIMEOUT = 2 };

// Polls until q's used idx is at least n past used_seen (VU_USED; used_seen moves to it), the
// device sets DEVICE_NEEDS_RESET (or FAILED) (VU_NEEDS_RESET), or timeout_ms milliseconds pass
// (VU_TIMEOUT). Sleeps poll_us between looks.
static inline enum vu_outcome vu_q_wait_ms(struct vu_queue* q, unsigned n, unsigned timeout_ms, unsigned poll_us) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    uint16_t got = (uint16_t)(vu_q_used_idx(q) - q->used_seen);
    if (got >= n && got < 0x8000) {
      q->used_seen = (uint16_t)(q->used_seen + got);
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
      return VU_USED;
    }
    if (vu_status() & (VU_S_NEEDS_RESET | VU_S_FAILED)) return VU_NEEDS_RESET;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (ms >= (long)timeout_ms) return VU_TIMEOUT;
    usleep(poll_us);  // polling a device ring; no interrupts are set up
  }
}

// --- queue 0 only (hostile_blk.c, hostile_rng.c): the same operations on these globals ---
static struct vu_queue vu_q0;
static struct desc* ring_desc;
static volatile uint16_t* avail;  // flags, idx, ring[]
static volatile uint8_t* used;    // flags, idx, ring[] of {u32 id, u32 len}
static uint16_t qsz, avail_idx, used_seen;

static inline struct vu_queue* vu_q0_sync(void) {  // vu_q0 with the globals' indexes
  vu_q0.avail_idx = avail_idx;
  vu_q0.used_seen = used_seen;
  return &vu_q0;
}

// Resets the device and brings it to DRIVER_OK with queue 0 of at most max_qsz entries (no
// MSI-X vector: polled). Driver features: VIRTIO_F_VERSION_1 plus features_lo (bits 0..31). The
// rings are zeroed; avail_idx / used_seen start at 0.
static inline void vu_init_queue(uint32_t features_lo, unsigned max_qsz) {
  vu_negotiate(features_lo);
  C16(VU_Q_SELECT) = 0;
  uint16_t size = C16(VU_Q_SIZE);
  if (size == 0 || size > max_qsz) die("queue size %u (want 1..%u)", size, max_qsz);
  vu_queue_setup(&vu_q0, 0, size);
  ring_desc = vu_q0.desc;
  avail = vu_q0.avail;
  used = vu_q0.used;
  qsz = vu_q0.size;
  avail_idx = used_seen = 0;
  notify = vu_q0.notify;
  vu_driver_ok();
}

// Puts descriptor head d into the next avail ring slot (not yet published).
static inline void vu_add(uint16_t d) {
  vu_q_add(vu_q0_sync(), d);
  avail_idx = vu_q0.avail_idx;
}

// Publishes avail idx `idx` (normally avail_idx) and rings queue 0's doorbell.
static inline void vu_publish(uint16_t idx) { vu_q_publish(vu_q0_sync(), idx); }

static inline uint16_t vu_used_idx(void) { return vu_q_used_idx(&vu_q0); }

// Used ring element i (mod queue size): descriptor id and written length.
static inline void vu_used_elem(uint16_t i, uint32_t* id, uint32_t* len) { vu_q_used_elem(&vu_q0, i, id, len); }

// Polls until the used idx is at least n past used_seen (VU_USED; used_seen moves to it), the
// device sets DEVICE_NEEDS_RESET (or FAILED) (VU_NEEDS_RESET), or timeout_s seconds pass (VU_TIMEOUT).
static inline enum vu_outcome vu_wait(unsigned n, unsigned timeout_s) {
  enum vu_outcome o = vu_q_wait_ms(vu_q0_sync(), n, timeout_s * 1000u, 1000);
  used_seen = vu_q0.used_seen;
  return o;
}
