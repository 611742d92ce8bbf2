// nvme_user.h: a polled NVMe driver in guest user space, for the hostile driver hostile_nvme.c
// (tests/e2e/nvme_test.sh). It drives a PCI NVMe controller that no kernel driver owns (unbind it
// from `nvme` first): maps BAR0 through /sys/bus/pci/devices/BDF/resource0, enables memory space
// and bus mastering with INTx disabled, finds guest-physical addresses of mlocked pages through
// /proc/self/pagemap, enables the controller with an admin queue pair (NVMe base spec 1.4 §7.6.1)
// and creates I/O queue pairs without interrupts (IEN 0): completions are polled by phase tag.
// Every wait is bounded; a command that never completes is reported, never waited for forever.
// Header only (static functions): one `gcc -static` of hostile_nvme.c. Setup errors print
// "TERN-NVME-HOSTILE-ERROR <what>" and exit 1.
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

static inline void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("TERN-NVME-HOSTILE-ERROR ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  exit(1);
}

static int pagemap_fd = -1;

// Guest-physical address of a present, locked byte of this process.
static inline uint64_t phys(const volatile void* p) {
  if (pagemap_fd < 0) pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
  if (pagemap_fd < 0) die("open pagemap");
  uint64_t e = 0;
  off_t off = (off_t)((uintptr_t)p / PAGE) * 8;
  if (pread(pagemap_fd, &e, 8, off) != 8) die("pagemap read");
  if (!(e >> 63)) die("page %p not present", (const void*)p);
  uint64_t pfn = e & ((1ull << 55) - 1);
  if (pfn == 0) die("pagemap gives no PFN (need CAP_SYS_ADMIN)");
  return pfn * PAGE + (uintptr_t)p % PAGE;
}

// n zeroed, mlocked pages (each physically contiguous; not contiguous with each other).
static inline uint8_t* pages(size_t n) {
  void* p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || mlock(p, n * PAGE) != 0) die("mmap/mlock %zu pages", n);
  memset(p, 0, n * PAGE);
  return p;
}

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

// ---- registers (§3.1) ----
static volatile uint8_t* bar;
static size_t bar_len;
static unsigned dstrd;  // doorbell stride: 4 << CAP.DSTRD bytes
#define REG_CAP 0x00
#define REG_VS 0x08
#define REG_CC 0x14
#define REG_CSTS 0x1c
#define REG_AQA 0x24
#define REG_ASQ 0x28
#define REG_ACQ 0x30
static inline uint32_t r32(unsigned o) { return *(volatile uint32_t*)(bar + o); }
static inline void w32(unsigned o, uint32_t v) { *(volatile uint32_t*)(bar + o) = v; }
static inline uint64_t r64(unsigned o) { return r32(o) | (uint64_t)r32(o + 4) << 32; }
static inline void w64(unsigned o, uint64_t v) {
  w32(o, (uint32_t)v);
  w32(o + 4, (uint32_t)(v >> 32));
}
// Byte offset of SQyTDBL (cq 0) or CQyHDBL (cq 1), §3.1.24.
static inline unsigned db_off(unsigned qid, int cq) { return 0x1000 + (2 * qid + (unsigned)cq) * dstrd; }
static inline void doorbell(unsigned qid, int cq, uint32_t v) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  w32(db_off(qid, cq), v);
}

// ---- queues (§4.1): one page each, so SQ size <= 64, CQ size <= 256 ----
struct sqe {
  uint8_t opc, flags;
  uint16_t cid;
  uint32_t nsid, cdw2, cdw3;
  uint64_t mptr, prp1, prp2;
  uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};
struct cqe {
  uint32_t dw0, dw1;
  uint16_t sqhd, sqid, cid, status;  // status: P bit 0, SC 8:1, SCT 11:9, DNR 15
};
_Static_assert(sizeof(struct sqe) == 64, "SQE");
_Static_assert(sizeof(struct cqe) == 16, "CQE");

struct nq {
  volatile struct sqe* sq;
  volatile struct cqe* cq;
  uint16_t qid, size, tail, head;
  uint8_t phase;
};
static uint16_t next_cid = 1;
// The completion of an Asynchronous Event Request seen while waiting for another command.
static uint32_t aer_dw0[8];
static unsigned aer_seen;
static uint16_t aer_cid;

static inline void nq_init(struct nq* q, uint16_t qid, uint16_t size) {
  if (!q->sq) {
    q->sq = (volatile struct sqe*)pages(1);
    q->cq = (volatile struct cqe*)pages(1);
  }
  memset((void*)q->sq, 0, PAGE);
  memset((void*)q->cq, 0, PAGE);
  q->qid = qid, q->size = size, q->tail = q->head = 0, q->phase = 1;
}

// Puts `c` (cid assigned here) at the SQ tail; ring = 0 leaves the doorbell for the caller.
static inline uint16_t nq_put(struct nq* q, struct sqe c, int ring) {
  c.cid = next_cid++;
  if (next_cid == 0) next_cid = 1;
  memcpy((void*)&q->sq[q->tail], &c, sizeof c);
  q->tail = (uint16_t)((q->tail + 1) % q->size);
  if (ring) doorbell(q->qid, 0, q->tail);
  return c.cid;
}

// Result of a command: SCT << 8 | SC, or -1 when it did not complete in time.
struct res {
  int st;
  uint32_t dw0;
  double secs;
};

// Waits (bounded) for the completion of `cid` on q; Asynchronous Event completions met on the
// way are recorded. The CQ head doorbell is written after each entry consumed.
static inline struct res nq_wait(struct nq* q, uint16_t cid, double timeout_s) {
  double t0 = now_s();
  for (;;) {
    volatile struct cqe* e = &q->cq[q->head];
    if ((e->status & 1) == q->phase) {
      struct cqe c;
      memcpy(&c, (const void*)e, sizeof c);
      if (++q->head == q->size) q->head = 0, q->phase ^= 1;
      doorbell(q->qid, 1, q->head);
      if (q->qid == 0 && aer_cid && c.cid == aer_cid) {
        if (aer_seen < 8) aer_dw0[aer_seen] = c.dw0;
        ++aer_seen;
        aer_cid = 0;
        continue;
      }
      if (c.cid != cid) continue;  // a completion of an earlier, timed-out command
      return (struct res){(c.status >> 1) & 0x7ff, c.dw0, now_s() - t0};
    }
    if (now_s() - t0 > timeout_s) return (struct res){-1, 0, now_s() - t0};
    usleep(20);
  }
}

static inline struct res nq_cmd(struct nq* q, struct sqe c) {
  uint16_t cid = nq_put(q, c, 1);
  return nq_wait(q, cid, 30);
}

// ---- the controller ----
static struct nq adminq;
static uint32_t mqes;  // CAP.MQES + 1

// Maps BAR0 of BDF, enables memory space + bus mastering (INTx disabled: we poll).
static inline void nv_open(const char* bdf) {
  char path[256];
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/config", bdf);
  int cfd = open(path, O_RDWR);
  if (cfd < 0) die("open %s", path);
  uint16_t cmd = 0;
  if (pread(cfd, &cmd, 2, 4) != 2) die("read command register");
  cmd |= 0x406;  // memory space + bus master + INTx disable
  if (pwrite(cfd, &cmd, 2, 4) != 2) die("write command register");
  close(cfd);
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/resource0", bdf);
  int fd = open(path, O_RDWR | O_SYNC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) die("open %s", path);
  bar_len = (size_t)st.st_size;
  void* m = mmap(NULL, bar_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) die("mmap %s", path);
  bar = m;
  uint64_t cap = r64(REG_CAP);
  dstrd = 4u << ((cap >> 32) & 0xf);
  mqes = (uint32_t)(cap & 0xffff) + 1;
}

// Waits (bounded, CAP.TO) until CSTS.RDY == rdy; returns CSTS.
static inline uint32_t nv_wait_rdy(unsigned rdy) {
  double t0 = now_s(), limit = 0.5 * (double)((r64(REG_CAP) >> 24) & 0xff) + 5;
  uint32_t csts;
  while (((csts = r32(REG_CSTS)) & 1) != rdy) {
    if (csts == 0xffffffffu || now_s() - t0 > limit) die("CSTS 0x%x, want RDY=%u", csts, rdy);
    usleep(100);
  }
  return csts;
}

// Resets the controller (CC.EN 0) and enables it with a fresh admin queue pair of `size` entries.
static inline void nv_enable(uint16_t size) {
  w32(REG_CC, 0);
  nv_wait_rdy(0);
  nq_init(&adminq, 0, size);
  aer_cid = 0;
  w32(REG_AQA, (uint32_t)(size - 1) << 16 | (uint32_t)(size - 1));
  w64(REG_ASQ, phys(adminq.sq));
  w64(REG_ACQ, phys(adminq.cq));
  w32(REG_CC, 6u << 16 | 4u << 20 | 1);  // IOSQES 6, IOCQES 4, MPS 0 (4 KiB), CSS NVM, EN
  uint32_t csts = nv_wait_rdy(1);
  if (csts & 2) die("CSTS.CFS set after enable (CSTS 0x%x)", csts);
}

// Admin commands (§5).
static inline struct res nv_create_cq(uint16_t qid, uint16_t size, uint64_t prp) {
  return nq_cmd(&adminq, (struct sqe){.opc = 0x05, .prp1 = prp,
                                      .cdw10 = (uint32_t)(uint16_t)(size - 1) << 16 | qid,
                                      .cdw11 = 1});  // PC 1, IEN 0
}
static inline struct res nv_create_sq(uint16_t qid, uint16_t size, uint64_t prp, uint16_t cqid) {
  return nq_cmd(&adminq, (struct sqe){.opc = 0x01, .prp1 = prp,
                                      .cdw10 = (uint32_t)(uint16_t)(size - 1) << 16 | qid,
                                      .cdw11 = (uint32_t)cqid << 16 | 1});  // PC 1
}
static inline struct res nv_identify(uint8_t cns, uint32_t nsid, void* page) {
  return nq_cmd(&adminq, (struct sqe){.opc = 0x06, .nsid = nsid, .prp1 = phys(page), .cdw10 = cns});
}

// An I/O queue pair qid with `size` entries on CQ qid.
static inline int nv_io_pair(struct nq* q, uint16_t qid, uint16_t size) {
  nq_init(q, qid, size);
  struct res r = nv_create_cq(qid, size, phys(q->cq));
  if (r.st != 0) return r.st;
  r = nv_create_sq(qid, size, phys(q->sq), qid);
  return r.st;
}
