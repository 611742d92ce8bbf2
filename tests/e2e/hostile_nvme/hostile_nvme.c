// tern-hostile-nvme: a hostile NVMe driver in guest user space, for tests/e2e/nvme_test.sh (case
// "hostile"). Takes a PCI NVMe controller that no kernel driver owns (nvme_user.h: BAR0 via sysfs,
// polled queues, no interrupts), enables it, and sends malformed admin commands, I/O commands and
// doorbell writes, each followed by what must still work. Prints one line per command:
//   TERN-NVME-ST name=<check> st=<SCT>/0x<SC> secs=<s>        (st=timeout: no completion in 30 s)
// and for the data checks:
//   TERN-NVME-DATA name=<check> match=<0|1>
// plus TERN-NVME-HOSTILE-ID (identify data), TERN-NVME-AER (asynchronous events seen, dw0),
// TERN-NVME-HOSTILE-CSTS and TERN-NVME-HOSTILE-DONE. The expected statuses (NVMe base spec 1.4)
// are in nvme_test.sh, next to the QEMU differences. Writes the bytes of LBA 0..7 read at the start
// to /tmp/nvme-seed1.bin, at the end to /tmp/nvme-seed2.bin, and the 64 KiB pattern it wrote at
// byte offset 1 MiB to /tmp/nvme-pattern.bin (the guest action hashes them; L1 compares the image).
// Usage: tern-hostile-nvme BDF   (static: gcc -static -O2)
#include "nvme_user.h"

#define NOWHERE (1ull << 40)  // 1 TiB: no RAM there (the guest has 256 MiB)
static struct nq io;
static uint32_t lba_bytes = 512;
static uint64_t nsze;

static void report(const char* name, struct res r) {
  if (r.st < 0)
    printf("TERN-NVME-ST name=%s st=timeout secs=%.3f\n", name, r.secs);
  else
    printf("TERN-NVME-ST name=%s st=%d/0x%02x secs=%.3f\n", name, r.st >> 8, r.st & 0xff, r.secs);
}

// An I/O command on SQ 1: opcode, nsid, starting LBA, number of LBAs (1-based here), PRPs.
static struct res io_cmd(uint8_t opc, uint32_t nsid, uint64_t slba, uint32_t nlb, uint64_t prp1,
                         uint64_t prp2) {
  return nq_cmd(&io, (struct sqe){.opc = opc, .nsid = nsid, .prp1 = prp1, .prp2 = prp2,
                                  .cdw10 = (uint32_t)slba, .cdw11 = (uint32_t)(slba >> 32),
                                  .cdw12 = nlb - 1});
}

// PRPs for `len` bytes at `buf` (page aligned, mlocked), with `list` as the PRP list page.
static void prps(uint8_t* buf, size_t len, uint64_t* list, uint64_t* prp1, uint64_t* prp2) {
  *prp1 = phys(buf);
  *prp2 = 0;
  if (len <= PAGE) return;
  if (len <= 2 * PAGE) {
    *prp2 = phys(buf + PAGE);
    return;
  }
  for (size_t i = 1; i * PAGE < len; ++i) list[i - 1] = phys(buf + i * PAGE);
  *prp2 = phys(list);
}

// A good transfer of `len` bytes at byte offset `off` of the namespace.
static struct res rw(uint8_t opc, uint64_t off, uint8_t* buf, size_t len, uint64_t* list) {
  uint64_t p1, p2;
  prps(buf, len, list, &p1, &p2);
  return io_cmd(opc, 1, off / lba_bytes, (uint32_t)(len / lba_bytes), p1, p2);
}

static void dump(const char* path, const uint8_t* p, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) die("write %s", path);
}

static uint8_t *seed1, *check, *big, *list_page, *loop_page;
static uint64_t* list;

// A good 4 KiB read of LBA 0.. after a doorbell abuse: completes with the seed's bytes.
static void read_works(const char* name) {
  memset(check, 0xee, PAGE);
  report(name, rw(0x02, 0, check, PAGE, list));
  printf("TERN-NVME-DATA name=%s match=%d\n", name, memcmp(check, seed1, PAGE) == 0);
}

static void admin_checks(void) {
  uint64_t cqp = phys(io.cq), sqp = phys(io.sq);
  report("cq-id-zero", nv_create_cq(0, 16, cqp));
  report("cq-id-huge", nv_create_cq(0xffff, 16, cqp));
  report("cq-size-one", nv_create_cq(1, 1, cqp));
  if (mqes < 65536) report("cq-size-past-mqes", nv_create_cq(1, (uint16_t)(mqes + 1), cqp));
  report("cq-create", nv_create_cq(1, io.size, cqp));
  report("cq-create-again", nv_create_cq(1, io.size, cqp));
  report("sq-cq-missing", nv_create_sq(1, io.size, sqp, 7));
  report("sq-cq-admin", nv_create_sq(1, io.size, sqp, 0));
  if (mqes < 65536) report("sq-size-past-mqes", nv_create_sq(1, (uint16_t)(mqes + 1), sqp, 1));
  report("sq-id-zero", nv_create_sq(0, io.size, sqp, 1));
  report("sq-id-huge", nv_create_sq(0xffff, io.size, sqp, 1));
  report("sq-create", nv_create_sq(1, io.size, sqp, 1));
}

// Bytes (a multiple of the LBA size) as LBAs.
static uint32_t L(uint64_t bytes) { return (uint32_t)(bytes / lba_bytes); }

static void prp_checks(void) {
  uint64_t p1, p2;
  uint8_t* buf = big;  // 32 pages
  report("prp1-outside-ram", io_cmd(0x02, 1, L(32768), L(PAGE), NOWHERE, 0));
  report("prp2-outside-ram", io_cmd(0x02, 1, L(32768), L(2 * PAGE), phys(buf), NOWHERE));
  report("list-outside-ram", io_cmd(0x02, 1, L(32768), L(4 * PAGE), phys(buf), NOWHERE));
  prps(buf, 4 * PAGE, list, &p1, &p2);
  list[1] = NOWHERE;
  report("list-entry-outside-ram", io_cmd(0x01, 1, L(4u << 20), L(4 * PAGE), p1, p2));
  report("prp1-offset-not-dword", io_cmd(0x02, 1, L(32768), 1, phys(buf) + 2, 0));
  report("prp2-offset", io_cmd(0x02, 1, L(32768), L(2 * PAGE), phys(buf), phys(buf + PAGE) + 0x200));
  prps(buf, 3 * PAGE, list, &p1, &p2);
  list[0] += 0x100;
  report("list-entry-offset", io_cmd(0x02, 1, L(32768), L(3 * PAGE), p1, p2));
  prps(buf, 3 * PAGE, list, &p1, &p2);
  report("list-pointer-not-dword", io_cmd(0x02, 1, L(32768), L(3 * PAGE), p1, p2 + 2));
  // A list that points back at itself: the list starts at the page's last entry, which (more
  // entries being needed) is the pointer to the next list page: the page itself, whose every
  // entry is the page again. 128 KiB read: the walk must end with the transfer, in bounded time.
  uint64_t lp = phys(loop_page);
  for (unsigned i = 0; i < PAGE / 8; ++i) ((uint64_t*)loop_page)[i] = lp;
  report("list-loop", io_cmd(0x02, 1, L(32768), L(32 * PAGE), phys(buf), lp + PAGE - 8));
  for (unsigned i = 0; i < PAGE / 8; ++i) ((uint64_t*)loop_page)[i] = lp;
  report("list-loop-write", io_cmd(0x01, 1, L(4u << 20), L(32 * PAGE), phys(buf), lp + PAGE - 8));
}

static uint32_t nn;  // Identify Controller NN: namespace IDs 1..NN are valid (active or not)

static void range_checks(void) {
  uint64_t pb = phys(check);
  report("lba-past-end", io_cmd(0x02, 1, nsze - 4, 8, pb, 0));
  report("lba-at-end", io_cmd(0x02, 1, nsze, 1, pb, 0));
  report("lba-wraps", io_cmd(0x02, 1, ~0ull - 3, 8, pb, 0));
  report("lba-last-ok", io_cmd(0x02, 1, nsze - 1, 1, pb, 0));
  report("mdts-exceeded", io_cmd(0x02, 1, 0, L(4u << 20), pb, phys(list)));
  report("nsid-past-nn", io_cmd(0x02, nn + 1, 0, 1, pb, 0));
  report("nsid-0", io_cmd(0x02, 0, 0, 1, pb, 0));
  report("io-opcode-7f", io_cmd(0x7f, 1, 0, 1, pb, 0));
  report("admin-opcode-ff", nq_cmd(&adminq, (struct sqe){.opc = 0xff}));
}

static void doorbell_checks(void) {
  doorbell(1, 0, io.size + 5u);  // SQ 1 tail past the queue's size
  read_works("db-sq-past-size");
  doorbell(1, 1, io.size + 7u);  // CQ 1 head past the queue's size
  read_works("db-cq-past-size");
  doorbell(9, 0, 1);  // queues that do not exist
  doorbell(9, 1, 1);
  doorbell(64, 0, 3);
  read_works("db-no-such-queue");
  doorbell(0, 0, 1000);  // the admin SQ tail past its size
  report("db-admin-past-size", nv_identify(1, 0, list_page));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) die("usage: tern-hostile-nvme BDF");
  nv_open(argv[1]);
  nv_enable(32);
  seed1 = pages(1), check = pages(1), big = pages(32), list_page = pages(1), loop_page = pages(1);
  list = (uint64_t*)list_page;
  uint8_t* id = pages(1);
  report("identify-controller", nv_identify(1, 0, id));
  unsigned mdts = id[77], vid = (unsigned)(id[0] | id[1] << 8);
  memcpy(&nn, id + 516, 4);
  report("identify-namespace", nv_identify(0, 1, id));
  memcpy(&nsze, id, 8);
  unsigned lbads = id[128 + 4 * (id[26] & 0xf) + 2];
  if (lbads >= 9 && lbads <= 12) lba_bytes = 1u << lbads;
  struct res q = nq_cmd(&adminq, (struct sqe){.opc = 0x09, .cdw10 = 0x07, .cdw11 = 3u << 16 | 3u});
  report("set-features-queues", q);
  printf("TERN-NVME-HOSTILE-ID vid=0x%04x mqes=%u mdts=%u nn=%u nsze=%llu lba_bytes=%u queues=0x%08x vs=0x%08x\n",
         vid, mqes, mdts, nn, (unsigned long long)nsze, lba_bytes, q.dw0, r32(REG_VS));
  aer_cid = nq_put(&adminq, (struct sqe){.opc = 0x0c}, 1);  // Asynchronous Event Request, held

  nq_init(&io, 1, 64);
  admin_checks();
  report("seed-read", rw(0x02, 0, seed1, PAGE, list));
  dump("/tmp/nvme-seed1.bin", seed1, PAGE);
  // 64 KiB written through a PRP list at byte offset 1 MiB, read back into other pages.
  for (unsigned i = 0; i < 16 * PAGE; ++i) big[i] = (uint8_t)(i * 7 + i / 4096 + 0x5a);
  dump("/tmp/nvme-pattern.bin", big, 16 * PAGE);
  report("pattern-write", rw(0x01, 1u << 20, big, 16 * PAGE, list));
  memset(big + 16 * PAGE, 0, 16 * PAGE);
  report("pattern-read", rw(0x02, 1u << 20, big + 16 * PAGE, 16 * PAGE, list));
  printf("TERN-NVME-DATA name=pattern-read match=%d\n", memcmp(big, big + 16 * PAGE, 16 * PAGE) == 0);
  prp_checks();
  range_checks();
  doorbell_checks();
  read_works("seed-again");
  dump("/tmp/nvme-seed2.bin", check, PAGE);
  // Asynchronous events posted meanwhile (information: the spec lets a controller post one for
  // the invalid doorbell writes when a request is outstanding).
  nq_wait(&adminq, 0, 0.5);
  for (unsigned i = 0; i < aer_seen && i < 8; ++i) printf("TERN-NVME-AER n=%u dw0=0x%08x\n", i, aer_dw0[i]);
  printf("TERN-NVME-AER seen=%u\n", aer_seen);
  printf("TERN-NVME-HOSTILE-CSTS csts=0x%08x cfs=%u\n", r32(REG_CSTS), (r32(REG_CSTS) >> 1) & 1);
  printf("TERN-NVME-HOSTILE-DONE\n");
  return 0;
}
