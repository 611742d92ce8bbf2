/* A hostile firmware for tern's firmware-boot devices (issue 26): run with
 *   tern run --firmware hostile_fw.bin --firmware-vars VARS --memory 64 --disk path=IMG
 * (IMG: any small image; its virtio-blk function's BARs are attacked), where VARS is a 64 KiB store
 * starting with "TERNVARS" whose last 4 KiB block is erased (0xFF). Entered in 32-bit protected
 * mode by entry.S; no static data (the image is a read-only memslot).
 *
 * Boot 1 (the scratch block's first byte is 0xFF) attacks fw_cfg (DMA descriptors outside RAM,
 * wrapping lengths, unknown control bits, selector sweeps), the pflash (command sequences out of
 * order, writes past its end and to the code image) and the chipset (PAM/SMRAM, configuration
 * space sweeps, 0xCF8/0xCF9, PM block) and a virtio device's BARs, reads back what the specs say it
 * must see, marks the scratch byte 0x01 and resets through the FADT's RESET_REG. Boot 2 (scratch
 * byte 0x01) checks that tern still serves fw_cfg and the flash (the byte survived the reset),
 * writes 0x02 after it and powers off through PIIX4 PM (S5). Each phase prints one line on COM1:
 * "TERN-HOSTILE-FW phase=NAME result=ok|fail[ detail]". Specs: QEMU docs/specs/fw_cfg.rst; Intel
 * 28F008SA-style CFI command set (status 0x80 ready, 0x30 command sequence error); Intel 82441FX
 * (PAM 59h-5Fh, SMRAM 72h), 82371AB (PIIX4). */
#include <stdint.h>

#define VARS_BASE 0xFFFE0000u /* 4 GiB - image (64 KiB) - store (64 KiB) */
#define VARS_SIZE 0x10000u
#define SCRATCH (VARS_BASE + VARS_SIZE - 0x1000u) /* the store's last erase block */
#define CODE_BASE 0xFFFF0000u
#define RAM_TOP 0x4000000u /* --memory 64 */
#define DESC 0x10000u      /* DMA descriptor */
#define BUF 0x20000u       /* DMA buffers */
#define BIG 0x100000u      /* large DMA target */
#define PM_BASE 0xB000u

/* The header: "_FVH" at offset 40 makes tern take the image for UEFI (--firmware-vars allowed). */
__attribute__((section(".header"), used)) static const char header[64] =
    "TERN-HOSTILE-FW\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0_FVH";

/* ---- port and memory access ---- */
static inline void outb(uint16_t p, uint8_t v) {
  __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(p));
}
static inline void outw(uint16_t p, uint16_t v) {
  __asm__ volatile("outw %0, %1" ::"a"(v), "Nd"(p));
}
static inline void outl(uint16_t p, uint32_t v) {
  __asm__ volatile("outl %0, %1" ::"a"(v), "Nd"(p));
}
static inline uint8_t inb(uint16_t p) {
  uint8_t v;
  __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(p));
  return v;
}
static inline uint16_t inw(uint16_t p) {
  uint16_t v;
  __asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(p));
  return v;
}
static inline uint32_t inl(uint16_t p) {
  uint32_t v;
  __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(p));
  return v;
}
static inline volatile uint8_t* p8(uint32_t a) {
  return (volatile uint8_t*)a;
}
static inline volatile uint32_t* p32(uint32_t a) {
  return (volatile uint32_t*)a;
}

void* memset(void* d, int c, uint32_t n) {
  volatile uint8_t* p = d;
  while (n--) *p++ = (uint8_t)c;
  return d;
}
void* memcpy(void* d, const void* s, uint32_t n) {
  volatile uint8_t* p = d;
  const uint8_t* q = s;
  while (n--) *p++ = *q++;
  return d;
}
static int streq(const volatile uint8_t* a, const char* b) {
  for (; *b; ++a, ++b)
    if (*a != (uint8_t)*b) return 0;
  return *a == 0;
}
static int memeq(const volatile uint8_t* a, const char* b, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i)
    if (a[i] != (uint8_t)b[i]) return 0;
  return 1;
}

/* ---- COM1 ---- */
static void puts_(const char* s) {
  for (; *s; ++s) outb(0x3F8, (uint8_t)*s);
}
static void puthex(uint32_t v) {
  char b[11] = "0x";
  int n = 2;
  int started = 0;
  for (int sh = 28; sh >= 0; sh -= 4) {
    unsigned d = (v >> sh) & 0xF;
    if (d || started || sh == 0) {
      b[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
      started = 1;
    }
  }
  b[n] = 0;
  puts_(b);
}

/* A phase: its first failed check is reported with the values seen. */
struct phase {
  const char* name;
  int failed;
};
static void check(struct phase* ph, int ok, const char* what, uint32_t got, uint32_t want) {
  if (ok || ph->failed++) return;
  puts_("TERN-HOSTILE-FW phase=");
  puts_(ph->name);
  puts_(" result=fail ");
  puts_(what);
  puts_(" got=");
  puthex(got);
  puts_(" want=");
  puthex(want);
  puts_("\n");
}
#define CHECK_EQ(ph, what, got, want)                     \
  do {                                                    \
    uint32_t g_ = (uint32_t)(got), w_ = (uint32_t)(want); \
    check((ph), g_ == w_, (what), g_, w_);                \
  } while (0)
static void done(struct phase* ph) {
  if (ph->failed) return;
  puts_("TERN-HOSTILE-FW phase=");
  puts_(ph->name);
  puts_(" result=ok\n");
}

/* ---- fw_cfg (fw_cfg.rst) ---- */
#define FW_SEL 0x510
#define FW_DATA 0x511
#define FW_DMA_HI 0x514
#define FW_DMA_LO 0x518
#define DMA_ERROR 0x01u
#define DMA_READ 0x02u
#define DMA_SKIP 0x04u
#define DMA_SELECT 0x08u
#define DMA_WRITE 0x10u

static uint32_t be32(uint32_t v) {
  return __builtin_bswap32(v);
}

/* Runs one DMA operation with the descriptor at `desc` (a 64-bit address); returns the control
 * word the device left (0 = done, DMA_ERROR = refused). */
static uint32_t dma_at(uint32_t desc_hi, uint32_t desc, uint32_t control, uint32_t len,
                       uint32_t addr_hi, uint32_t addr) {
  if (desc_hi == 0 && desc < RAM_TOP) {
    p32(desc)[0] = be32(control);
    p32(desc)[1] = be32(len);
    p32(desc)[2] = be32(addr_hi);
    p32(desc)[3] = be32(addr);
  }
  outl(FW_DMA_HI, be32(desc_hi));
  outl(FW_DMA_LO, be32(desc));
  return desc_hi == 0 && desc < RAM_TOP ? be32(p32(desc)[0]) : 0;
}
static uint32_t dma(uint32_t control, uint32_t len, uint32_t addr) {
  return dma_at(0, DESC, control, len, 0, addr);
}
static uint32_t dma_read_key(uint16_t key, uint32_t len, uint32_t addr) {
  return dma(((uint32_t)key << 16) | DMA_SELECT | DMA_READ, len, addr);
}

/* Looks `name` up in the file directory (key 0x19); returns its key (0 if absent), size in *size.
 */
static uint16_t fw_file(const char* name, uint32_t* size) {
  if (dma_read_key(0x19, 0x4000, BUF) != 0) return 0;
  uint32_t count = be32(p32(BUF)[0]);
  for (uint32_t i = 0; i < count && i < 200; ++i) {
    uint32_t e = BUF + 4 + i * 64;
    if (streq(p8(e + 8), name)) {
      *size = be32(p32(e)[0]);
      return (uint16_t)((p8(e + 4)[0] << 8) | p8(e + 4)[1]);
    }
  }
  return 0;
}

static int signature_ok(void) {
  outw(FW_SEL, 0);
  return inb(FW_DATA) == 'Q' && inb(FW_DATA) == 'E' && inb(FW_DATA) == 'M' && inb(FW_DATA) == 'U';
}

static void fwcfg_registers(void) {
  struct phase ph = {"fwcfg-registers", 0};
  check(&ph, signature_ok(), "signature QEMU", 0, 0);
  const char dma_sig[] = "QEMU CFG";
  for (int i = 0; i < 8; ++i) CHECK_EQ(&ph, "DMA signature byte", inb(FW_DMA_HI + i), dma_sig[i]);
  CHECK_EQ(&ph, "port 0x512", inb(0x512), 0xFF);
  CHECK_EQ(&ph, "port 0x513", inb(0x513), 0xFF);
  /* Wrong widths and data-port writes are ignored: the selection stays the signature. */
  outw(FW_SEL, 0);
  outb(FW_SEL, 0x19);       /* 1-byte selector write */
  outl(FW_SEL, 0x00190019); /* 4-byte selector write */
  outb(FW_DATA, 0x55);      /* data port is read-only */
  outw(FW_DMA_HI, 0xFFFF);  /* 2-byte DMA register writes */
  outb(FW_DMA_LO + 3, 0x10);
  CHECK_EQ(&ph, "selection kept", inb(FW_DATA), 'Q');
  /* A 4-byte read at the data port returns 4 item bytes. */
  outw(FW_SEL, 0);
  CHECK_EQ(&ph, "4-byte data read", inl(FW_DATA), 0x554D4551); /* "QEMU" */
  CHECK_EQ(&ph, "read past the item", inb(FW_DATA), 0);
  /* The interface ID: traditional + DMA. */
  outw(FW_SEL, 1);
  CHECK_EQ(&ph, "ID bit 1 (DMA)", inb(FW_DATA) & 2, 2);
  done(&ph);
}

static void fwcfg_dma_errors(void) {
  struct phase ph = {"fwcfg-dma-errors", 0};
  const uint32_t rd = (0u << 16) | DMA_SELECT | DMA_READ; /* read the signature */
  /* Buffers outside RAM, across its end, wrapping past 2^64, a length that wraps 32 bits. */
  CHECK_EQ(&ph, "buffer in the PCI hole", dma(rd, 16, 0xD0000000u) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "buffer across the end of RAM", dma(rd, 16, RAM_TOP - 8) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "buffer in the firmware image", dma(rd, 16, CODE_BASE) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "buffer in the flash", dma(rd, 16, VARS_BASE) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "buffer wrapping 2^64",
           dma_at(0, DESC, rd, 16, 0xFFFFFFFFu, 0xFFFFFFF8u) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "buffer above 4 GiB", dma_at(0, DESC, rd, 16, 0x10, 0) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "length 0xFFFFFFFF", dma(rd, 0xFFFFFFFFu, BUF) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "length 0x80000000", dma(rd, 0x80000000u, BUF) & DMA_ERROR, DMA_ERROR);
  /* Control bits: unknown ones, ERROR set by the guest, WRITE to a read-only item. */
  CHECK_EQ(&ph, "unknown control bit 0x20", dma(rd | 0x20, 4, BUF) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "unknown control bit 0x8000", dma(rd | 0x8000, 4, BUF) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "ERROR set by the guest", dma(rd | DMA_ERROR, 4, BUF) & DMA_ERROR, DMA_ERROR);
  CHECK_EQ(&ph, "WRITE to a read-only item", dma(DMA_SELECT | DMA_WRITE, 4, BUF) & DMA_ERROR,
           DMA_ERROR);
  /* A refused operation transferred nothing and kept the selection: the buffer is untouched. */
  memset((void*)BUF, 0xAA, 16);
  dma(rd, 16, RAM_TOP - 8);
  CHECK_EQ(&ph, "buffer untouched", p32(BUF)[0], 0xAAAAAAAAu);
  /* Nothing but SELECT, and a zero length anywhere: done, no error. */
  CHECK_EQ(&ph, "SELECT only", dma(DMA_SELECT, 0, 0), 0);
  CHECK_EQ(&ph, "READ of length 0 outside RAM", dma(rd, 0, 0xD0000000u), 0);
  /* Descriptors nowhere to be found: nothing happens (nowhere to write the error). */
  dma_at(0, 0xD0000000u, rd, 16, 0, BUF);
  dma_at(0, RAM_TOP - 8, 0, 0, 0, 0); /* straddles the end of RAM */
  dma_at(0, CODE_BASE, 0, 0, 0, 0);
  dma_at(0, VARS_BASE, 0, 0, 0, 0);
  dma_at(0xFFFFFFFFu, 0xFFFFFFF8u, 0, 0, 0, 0);
  dma_at(0x12345678u, DESC, 0, 0, 0, 0); /* a latched high half */
  /* The latched high half is cleared after an operation: the next one works. */
  CHECK_EQ(&ph, "DMA after the unreachable descriptors", dma(rd, 4, BUF), 0);
  CHECK_EQ(&ph, "signature by DMA", p32(BUF)[0], 0x554D4551);
  /* The destination is the descriptor itself: data first, then the control word (0). */
  CHECK_EQ(&ph, "read into the descriptor", dma(rd, 16, DESC), 0);
  CHECK_EQ(&ph, "descriptor bytes 4..7 (zero fill)", p32(DESC)[1], 0);
  /* SKIP past the end, then READ: zeros. */
  dma(DMA_SELECT | DMA_SKIP, 0xFFFFFFFFu, 0);
  memset((void*)BUF, 0xAA, 8);
  CHECK_EQ(&ph, "READ after SKIP past the end", dma(DMA_READ, 8, BUF), 0);
  CHECK_EQ(&ph, "zeros past the end", p32(BUF)[0] | p32(BUF)[1], 0);
  /* A large read: the directory, then zeros up to 32 MiB. */
  p32(BIG + 0x1FFFFFC)[0] = 0xAAAAAAAAu;
  CHECK_EQ(&ph, "32 MiB read of the directory", dma_read_key(0x19, 0x2000000u, BIG), 0);
  CHECK_EQ(&ph, "zero fill at the end", p32(BIG + 0x1FFFFFC)[0], 0);
  done(&ph);
}

/* Whether `key` selects an item: the write-channel bit 0x4000 does not change what is read
 * (QEMU masks it, FW_CFG_ENTRY_MASK); arch-local keys (0x8000) hold nothing on tern. */
static int served_key(uint32_t key, uint32_t files) {
  const uint32_t k = key & ~0x4000u;
  return k == 0x00 || k == 0x01 || k == 0x03 || k == 0x04 || k == 0x05 || k == 0x0E || k == 0x0F ||
         k == 0x19 || (k >= 0x20 && k < 0x20 + files);
}

static void fwcfg_selector_sweep(void) {
  struct phase ph = {"fwcfg-selector-sweep", 0};
  dma_read_key(0x19, 4, BUF);
  const uint32_t files = be32(p32(BUF)[0]);
  check(&ph, files >= 5 && files < 64, "file count", files, 5);
  /* Every key through the ports (selector, one data byte), every key by DMA (4 bytes): keys
   * that hold no item read as zeros, and a DMA read of one is no error (fw_cfg.rst). */
  uint32_t nonzero = 0;
  for (uint32_t k = 0; k <= 0xFFFF; ++k) {
    outw(FW_SEL, (uint16_t)k);
    const uint8_t b = inb(FW_DATA);
    if (served_key(k, files)) continue;
    if (b) ++nonzero;
  }
  CHECK_EQ(&ph, "PIO: unknown keys with data", nonzero, 0);
  uint32_t errors = 0;
  nonzero = 0;
  for (uint32_t k = 0; k <= 0xFFFF; ++k) {
    p32(BUF)[0] = 0xAAAAAAAAu;
    errors += dma_read_key((uint16_t)k, 4, BUF) != 0;
    if (served_key(k, files)) continue;
    if (p32(BUF)[0]) ++nonzero;
  }
  CHECK_EQ(&ph, "DMA: errors", errors, 0);
  CHECK_EQ(&ph, "DMA: unknown keys with data", nonzero, 0);
  done(&ph);
}

/* Good DMA reads still work: the signature and etc/e820's first entry (RAM at 0). */
static void fwcfg_alive(struct phase* ph) {
  check(ph, signature_ok(), "fw_cfg signature", 0, 0);
  uint32_t size = 0;
  const uint16_t key = fw_file("etc/e820", &size);
  check(ph, key >= 0x20, "etc/e820 key", key, 0x20);
  memset((void*)BUF, 0xAA, 20);
  CHECK_EQ(ph, "etc/e820 DMA", dma_read_key(key, 20, BUF), 0);
  CHECK_EQ(ph, "e820[0].address", p32(BUF)[0] | p32(BUF)[1], 0);
  CHECK_EQ(ph, "e820[0].length", p32(BUF)[2], 0x4000000u);
  CHECK_EQ(ph, "e820[0].type", p32(BUF)[4], 1);
}

/* ---- pflash (CFI, Intel command set) ---- */
static void fcmd(uint32_t at, uint8_t cmd) {
  p8(at)[0] = cmd;
}
static uint8_t fstatus(void) {
  fcmd(VARS_BASE, 0x70);
  return p8(VARS_BASE)[0];
}

static void flash_sequences(void) {
  struct phase ph = {"flash-sequences", 0};
  check(&ph, memeq(p8(VARS_BASE), "TERNVARS", 8), "store marker", p8(VARS_BASE)[0], 'T');
  /* Out of order: a confirm with no erase set-up, an unknown command, write-to-buffer (not
   * offered by the query table), a lock set-up with a bad second cycle: each is a command
   * sequence error (SR.5 and SR.4 with SR.7 ready), and the array is unchanged. */
  const uint8_t bad[] = {0xD0, 0x42, 0xE8, 0x01, 0xC0};
  for (unsigned i = 0; i < sizeof bad; ++i) {
    fcmd(VARS_BASE, 0x50);
    fcmd(VARS_BASE + 0x100, bad[i]);
    CHECK_EQ(&ph, "status after a bad command", fstatus(), 0xB0);
  }
  fcmd(VARS_BASE, 0x50);
  fcmd(VARS_BASE, 0x60);
  fcmd(VARS_BASE, 0x99);
  CHECK_EQ(&ph, "status after a bad lock cycle", fstatus(), 0xB0);
  fcmd(VARS_BASE, 0x50);
  fcmd(SCRATCH, 0x20);
  fcmd(SCRATCH, 0x10); /* not the erase confirm */
  CHECK_EQ(&ph, "status after a bad erase confirm", fstatus(), 0xB0);
  /* Clear status clears every bit (QEMU; OVMF's detection reads 0 after 0x50, 0x70). */
  fcmd(VARS_BASE, 0x50);
  CHECK_EQ(&ph, "status after clear", fstatus(), 0x00);
  fcmd(VARS_BASE, 0xFF);
  check(&ph, memeq(p8(VARS_BASE), "TERNVARS", 8), "array after bad sequences", 0, 0);
  CHECK_EQ(&ph, "scratch block not erased", p8(SCRATCH + 0x800)[0], 0xFF);
  /* Identifier and CFI query. */
  fcmd(VARS_BASE, 0x90);
  CHECK_EQ(&ph, "manufacturer", p8(VARS_BASE)[0], 0x89);
  CHECK_EQ(&ph, "device", p8(VARS_BASE + 1)[0], 0x18);
  fcmd(VARS_BASE, 0x98);
  check(&ph, memeq(p8(VARS_BASE + 0x10), "QRY", 3), "CFI QRY", p8(VARS_BASE + 0x10)[0], 'Q');
  /* Multi-byte command writes: the low byte is the command. */
  p32(VARS_BASE)[0] = 0x12345650u; /* clear status */
  p32(VARS_BASE)[0] = 0xFFFFFF70u; /* read status */
  CHECK_EQ(&ph, "dword commands", p8(VARS_BASE)[0], 0x00);
  /* Program then erase in the scratch block. */
  fcmd(SCRATCH + 0x800, 0x40);
  p8(SCRATCH + 0x800)[0] = 0x5A;
  CHECK_EQ(&ph, "status after program", p8(VARS_BASE)[0], 0x80);
  fcmd(VARS_BASE, 0xFF);
  CHECK_EQ(&ph, "programmed byte", p8(SCRATCH + 0x800)[0], 0x5A);
  fcmd(SCRATCH + 0x800, 0x20);
  fcmd(SCRATCH + 0x800, 0xD0);
  CHECK_EQ(&ph, "status after erase", p8(VARS_BASE)[0], 0x80);
  fcmd(VARS_BASE, 0xFF);
  CHECK_EQ(&ph, "erased byte", p8(SCRATCH + 0x800)[0], 0xFF);
  /* A program whose data is a command byte, and a dword program across the store's end (into
   * the code image). */
  fcmd(SCRATCH + 0xF00, 0x10);
  p8(SCRATCH + 0xF00)[0] = 0xFF;
  fcmd(VARS_BASE, 0x50);
  fcmd(VARS_BASE + VARS_SIZE - 1, 0x10);
  p32(VARS_BASE + VARS_SIZE - 2)[0] = 0x11223344u;
  fcmd(VARS_BASE, 0x50);
  fcmd(VARS_BASE, 0xFF);
  check(&ph, memeq(p8(VARS_BASE), "TERNVARS", 8), "array at the end", 0, 0);
  done(&ph);
}

static void flash_code_region(void) {
  struct phase ph = {"flash-code-writes", 0};
  /* The code image is ROM: flash commands and data written to it change nothing. */
  const uint32_t before = p32(CODE_BASE + 40)[0];
  const uint32_t vector = p32(0xFFFFFFF0u)[0];
  fcmd(CODE_BASE + 40, 0x90);
  fcmd(CODE_BASE + 40, 0x70);
  p32(CODE_BASE + 40)[0] = 0xDEADBEEFu;
  p32(0xFFFFFFF0u)[0] = 0xDEADBEEFu;
  p8(0xFFFFFFFFu)[0] = 0x00;
  for (uint32_t i = 0; i < 16; ++i) p8(CODE_BASE + i * 0x1000)[0] = 0x20;
  CHECK_EQ(&ph, "\"_FVH\" kept", p32(CODE_BASE + 40)[0], before);
  CHECK_EQ(&ph, "reset vector kept", p32(0xFFFFFFF0u)[0], vector);
  check(&ph, memeq(p8(CODE_BASE + 40), "_FVH", 4), "header bytes", p8(CODE_BASE + 40)[0], '_');
  done(&ph);
}

/* ---- chipset: PCI configuration mechanism #1 ---- */
static uint32_t cfg_addr(uint32_t bdf, uint32_t reg) {
  return 0x80000000u | (bdf << 8) | (reg & 0xFC);
}
static uint32_t cfg_read32(uint32_t bdf, uint32_t reg) {
  outl(0xCF8, cfg_addr(bdf, reg));
  return inl(0xCFC);
}
static uint8_t cfg_read8(uint32_t bdf, uint32_t reg) {
  outl(0xCF8, cfg_addr(bdf, reg));
  return inb(0xCFC + (reg & 3));
}
static void cfg_write32(uint32_t bdf, uint32_t reg, uint32_t v) {
  outl(0xCF8, cfg_addr(bdf, reg));
  outl(0xCFC, v);
}
static void cfg_write8(uint32_t bdf, uint32_t reg, uint8_t v) {
  outl(0xCF8, cfg_addr(bdf, reg));
  outb(0xCFC + (reg & 3), v);
}
#define BDF(d, f) (((d) << 3) | (f))
#define HOST BDF(0, 0)
#define ISA BDF(1, 0)
#define PM BDF(1, 3)

static void enable_pm(void) {
  cfg_write32(PM, 0x40, PM_BASE | 1); /* PMBA */
  cfg_write8(PM, 0x80, 1);            /* PMREGMISC.PMIOSE */
}

static void chipset_pam(void) {
  struct phase ph = {"chipset-pam", 0};
  for (uint32_t v = 0; v < 256; ++v)
    for (uint32_t r = 0x59; r <= 0x5F; ++r) {
      cfg_write8(HOST, r, (uint8_t)v);
      CHECK_EQ(&ph, "PAM read back", cfg_read8(HOST, r), v & (r == 0x59 ? 0x30 : 0x33));
    }
  /* SMRAM: reset 02h; D_LCK clears D_OPEN and then freezes D_OPEN, D_LCK, G_SMRAME. */
  CHECK_EQ(&ph, "SMRAM reset value", cfg_read8(HOST, 0x72), 0x02);
  cfg_write8(HOST, 0x72, 0x40);
  CHECK_EQ(&ph, "SMRAM D_OPEN", cfg_read8(HOST, 0x72), 0x42);
  cfg_write8(HOST, 0x72, 0x50);
  CHECK_EQ(&ph, "SMRAM D_LCK", cfg_read8(HOST, 0x72), 0x12);
  cfg_write8(HOST, 0x72, 0x48);
  CHECK_EQ(&ph, "SMRAM locked", cfg_read8(HOST, 0x72) & 0x58, 0x10);
  done(&ph);
}

static void chipset_sweep(void) {
  struct phase ph = {"chipset-config-sweep", 0};
  const uint32_t fns[] = {HOST, ISA, PM};
  const uint32_t ids[] = {0x12378086u, 0x70008086u, 0x71138086u};
  const uint32_t patterns[] = {0xFFFFFFFFu, 0x00000000u, 0x5A5AA5A5u, 0x00000000u};
  for (unsigned f = 0; f < 3; ++f)
    for (unsigned p = 0; p < 4; ++p)
      for (uint32_t r = 0; r < 256; r += 4) {
        cfg_write32(fns[f], r, patterns[p]);
        cfg_write8(fns[f], r + 1, (uint8_t)patterns[p]);
        cfg_read32(fns[f], r);
      }
  for (unsigned f = 0; f < 3; ++f)
    CHECK_EQ(&ph, "vendor/device kept", cfg_read32(fns[f], 0), ids[f]);
  /* Functions that do not exist read all ones; writes to them go nowhere. */
  for (uint32_t d = 0; d < 32; ++d)
    for (uint32_t f = 0; f < 8; ++f) {
      const uint32_t bdf = BDF(d, f);
      if (bdf == HOST || bdf == ISA || bdf == PM) continue;
      const uint32_t id = cfg_read32(bdf, 0);
      if (d >= 2 && id != 0xFFFFFFFFu) continue; /* a device of the VM */
      cfg_write32(bdf, 0x10, 0xFFFFFFFFu);
      CHECK_EQ(&ph, "absent function", cfg_read32(bdf, 0), 0xFFFFFFFFu);
    }
  CHECK_EQ(&ph, "bus 255", cfg_read32(0xFF00 | BDF(0, 0), 0), 0xFFFFFFFFu);
  /* 0xCF8 abuse: byte and word writes, the enable bit clear, unaligned data-port accesses. */
  outb(0xCF8, 0xFF);
  outw(0xCFA, 0xFFFF);
  outl(0xCF8, 0x00000000u);
  inl(0xCFC);
  outl(0xCFC, 0xFFFFFFFFu);
  outl(0xCF8, 0x80000003u);
  inw(0xCFE);
  inb(0xCFF);
  outl(0xCF8, 0x7FFFFFFFu);
  inl(0xCFC);
  CHECK_EQ(&ph, "host bridge after 0xCF8 abuse", cfg_read32(HOST, 0), ids[0]);
  /* Reset Control without RCPU: no reset, the value reads back (SRST, bit 1). */
  outb(0xCF9, 0x02);
  CHECK_EQ(&ph, "RC", inb(0xCF9) & 0x02, 0x02);
  outb(0xCF9, 0x00);
  /* PIRQ route control: reset 80h; routing to IRQ 10 reads back. */
  cfg_write8(ISA, 0x60, 0x0A);
  CHECK_EQ(&ph, "PIRQRCA", cfg_read8(ISA, 0x60), 0x0A);
  done(&ph);
}

static void chipset_pm(void) {
  struct phase ph = {"chipset-pm", 0};
  enable_pm();
  CHECK_EQ(&ph, "PMBA", cfg_read32(PM, 0x40), PM_BASE | 1);
  /* Sleep requests other than S5 (SLP_TYP 0, 1, 7 with SLP_EN): nothing happens. */
  const uint16_t typs[] = {0, 1, 7};
  for (unsigned i = 0; i < 3; ++i) outw(PM_BASE + 4, (uint16_t)((typs[i] << 10) | (1u << 13)));
  /* Every other byte of the block, written with all ones and read. */
  for (uint32_t o = 0; o < 0x40; ++o) {
    if (o == 4 || o == 5) continue;
    outb((uint16_t)(PM_BASE + o), 0xFF);
    inb((uint16_t)(PM_BASE + o));
  }
  const uint32_t t0 = inl(PM_BASE + 8) & 0xFFFFFF;
  uint32_t t1 = t0;
  for (int i = 0; i < 100 && t1 == t0; ++i) t1 = inl(PM_BASE + 8) & 0xFFFFFF;
  check(&ph, t1 != t0, "PM timer runs", t1, t0);
  /* A foreign PM base, then back. */
  cfg_write32(PM, 0x40, 0xC001);
  inw(0xC000);
  enable_pm();
  done(&ph);
}

/* ---- a virtio device's BARs: overlapping, across the window's end, outside it ---- */
static int firmware_alive(void) {
  return signature_ok() && memeq(p8(VARS_BASE), "TERNVARS", 8);
}

static void pci_bar_moves(void) {
  struct phase ph = {"pci-bar-moves", 0};
  uint32_t dev = 0;
  for (uint32_t d = 2; d < 32 && !dev; ++d)
    if ((cfg_read32(BDF(d, 0), 0) & 0xFFFF) == 0x1AF4) dev = BDF(d, 0);
  check(&ph, dev != 0, "a virtio device on bus 0", 0, 0x1AF4);
  if (ph.failed) return;
  const uint32_t id = cfg_read32(dev, 0);
  /* Every BAR at the same address (overlapping), at the window's last page (the BARs cross
   * its end), over the flash, the code image, the LAPIC, RAM and 0; memory decode on, then
   * read at the address. */
  const uint32_t places[] = {0xC0000000u, 0xFEBFF000u, VARS_BASE,   CODE_BASE,
                             0xFEE00000u, 0x00100000u, 0x00000000u, 0xFFFFF000u};
  for (unsigned i = 0; i < sizeof places / sizeof places[0]; ++i) {
    cfg_write8(dev, 4, 0);
    for (uint32_t r = 0x10; r <= 0x24; r += 4) cfg_write32(dev, r, places[i]);
    cfg_write8(dev, 4, 0x07);
    (void)p32(places[i] + 0x10)[0];
    check(&ph, firmware_alive(), "fw_cfg and flash with the BARs moved", i, 0);
  }
  /* Memory decode toggled while the BARs overlap inside the window (notification ioeventfds
   * follow each move). */
  for (uint32_t r = 0x10; r <= 0x24; r += 4) cfg_write32(dev, r, 0xC0000000u);
  for (int i = 0; i < 200; ++i) cfg_write8(dev, 4, (uint8_t)(i & 1 ? 0x07 : 0x00));
  /* The whole configuration space with patterns (BARs sized, capabilities overwritten). */
  const uint32_t patterns[] = {0xFFFFFFFFu, 0x00000000u, 0x5A5AA5A5u, 0x00000000u};
  for (unsigned p = 0; p < 4; ++p)
    for (uint32_t r = 0; r < 256; r += 4) {
      cfg_write32(dev, r, patterns[p]);
      cfg_read32(dev, r);
    }
  cfg_write8(dev, 4, 0);
  CHECK_EQ(&ph, "vendor/device kept", cfg_read32(dev, 0), id);
  check(&ph, firmware_alive(), "fw_cfg and flash after the sweep", 0, 0);
  done(&ph);
}

/* ---- ACPI reset (the FADT's RESET_REG, from etc/acpi/tables) ---- */
static void acpi_reset(void) {
  struct phase ph = {"acpi-reset", 0};
  uint32_t size = 0;
  const uint16_t key = fw_file("etc/acpi/tables", &size);
  check(&ph, key >= 0x20 && size > 0 && size < 0x10000, "etc/acpi/tables", key, size);
  if (ph.failed) return;
  CHECK_EQ(&ph, "tables DMA", dma_read_key(key, size, BIG), 0);
  uint32_t fadt = 0;
  for (uint32_t o = 0; o + 4 <= size; o += 4)
    if (memeq(p8(BIG + o), "FACP", 4)) {
      fadt = BIG + o;
      break;
    }
  check(&ph, fadt != 0, "FADT found", 0, 1);
  if (ph.failed) return;
  const uint32_t flags = p32(fadt + 112)[0];
  const uint8_t space = p8(fadt + 116)[0];
  const uint32_t port = p32(fadt + 120)[0];
  const uint8_t value = p8(fadt + 128)[0];
  CHECK_EQ(&ph, "FADT RESET_REG_SUP", (flags >> 10) & 1, 1);
  CHECK_EQ(&ph, "RESET_REG address space (SystemIO)", space, 1);
  CHECK_EQ(&ph, "RESET_REG address", port, 0xCF9);
  CHECK_EQ(&ph, "RESET_VALUE", value, 0x06);
  puts_("TERN-HOSTILE-FW phase=acpi-reset writing ");
  puthex(value);
  puts_(" to ");
  puthex(port);
  puts_("\n");
  /* Whatever the table says (a wrong address shows as no reset). */
  if (space == 1) outb((uint16_t)port, value);
  for (int i = 0; i < 1000; ++i) inb(0x80); /* exits: the reset stops the vCPU at one */
  check(&ph, 0, "still running after the reset write", 0, 1);
}

static void flash_program(uint32_t at, uint8_t v) {
  fcmd(at, 0x10);
  p8(at)[0] = v;
  fcmd(VARS_BASE, 0xFF);
}

static void poweroff(void) {
  enable_pm();
  outw(PM_BASE + 4, (uint16_t)((5u << 10) | (1u << 13))); /* SLP_TYP 5 (\_S5_), SLP_EN */
  for (;;) __asm__ volatile("hlt");
}

void hostile_main(void) {
  const uint8_t boot = p8(SCRATCH)[0];
  if (boot == 0xFF) {
    puts_("TERN-HOSTILE-FW boot=1\n");
    fwcfg_registers();
    fwcfg_dma_errors();
    fwcfg_selector_sweep();
    flash_sequences();
    flash_code_region();
    chipset_pam();
    chipset_sweep();
    chipset_pm();
    pci_bar_moves();
    struct phase ph = {"alive-after-attacks", 0};
    fwcfg_alive(&ph);
    check(&ph, memeq(p8(VARS_BASE), "TERNVARS", 8), "flash marker", 0, 0);
    done(&ph);
    flash_program(SCRATCH, 0x01);
    acpi_reset();
    poweroff(); /* the reset did not happen: end anyway */
  }
  struct phase ph = {"alive-after-reset", 0};
  puts_("TERN-HOSTILE-FW boot=2\n");
  CHECK_EQ(&ph, "boot marker kept across the reset", boot, 0x01);
  fwcfg_alive(&ph);
  check(&ph, memeq(p8(VARS_BASE), "TERNVARS", 8), "flash marker", 0, 0);
  done(&ph);
  flash_program(SCRATCH + 1, 0x02);
  puts_("TERN-HOSTILE-FW done\n");
  poweroff();
}
