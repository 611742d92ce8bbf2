// tern-hostile-blk: a hostile virtio-blk driver in guest user space, for tests/e2e/disk_test.sh.
// Drives a virtio-blk PCI function (modern, virtio 1.x) that no kernel driver owns through
// virtio_user.h (BARs via sysfs, queue 0 polled, no interrupts) and posts only WRITE
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
//    or: tern-hostile-blk BDF write1   (tests/e2e/vhost_user_test.sh, a read-only disk): one
//        512-byte WRITE of sector 0, not waiting for a go line; prints
//        TERN-HOSTILE write1 status=<s> len=<used length>   (a read-only disk must answer 1 = IOERR)
#include "virtio_user.h"

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
  vu_add(d);
}

static void kick_and_wait(unsigned n) {
  vu_publish(avail_idx);
  if (vu_wait(n, 300) != VU_USED)
    die("timeout or NEEDS_RESET: used idx %u, want %u, status 0x%x", vu_used_idx(),
        (uint16_t)(used_seen + n), vu_status());
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) die("usage: tern-hostile-blk BDF [requests]");
  int write1 = argc > 2 && strcmp(argv[2], "write1") == 0;
  unsigned n = write1 ? 1 : argc > 2 ? (unsigned)atoi(argv[2]) : 64;
  vu_open(argv[1]);
  if (!devcfg) die("no virtio device capability");
  vu_init_queue(1u << 28, 256);  // VIRTIO_F_INDIRECT_DESC
  uint32_t size_max = *(volatile uint32_t*)(devcfg + 8), seg_max = *(volatile uint32_t*)(devcfg + 12);
  uint64_t capacity = *(volatile uint64_t*)(devcfg + 0);
  if (n + 3 > qsz || n > 128) die("too many requests %u for queue size %u", n, qsz);
  if (capacity < (uint64_t)n * 2048) die("disk too small: %llu sectors", (unsigned long long)capacity);
  hdrs = pages(1);
  statuses = pages(1);
  tables = pages(n + 3);
  buf = huge_page();
  if (buf) {
    memset(buf, 0x5a, HUGE);
    buf_len = HUGE;
  } else {
    buf = pages(1);
    memset(buf, 0x5a, PAGE);
    buf_len = PAGE;
  }
  if (write1) {  // whatever the driver negotiated: a read-only disk never takes a write
    static uint64_t wa[1];
    static uint32_t wl[1];
    wa[0] = phys(buf), wl[0] = 512;
    post(0, 0, wa, wl, 1, 0);
    kick_and_wait(1);
    uint32_t id = 0, len = 0;
    vu_used_elem(0, &id, &len);
    printf("TERN-HOSTILE write1 status=%u len=%u\n", statuses[0], len);
    C8(VU_STATUS) = 0;
    return 0;
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
  C8(VU_STATUS) = 0;  // reset the device: it forgets the queue
  printf("TERN-HOSTILE-DONE\n");
  return 0;
}
