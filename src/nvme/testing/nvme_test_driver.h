// NvmeTestDriver: drives an NvmeController through bar_write/bar_read and config space the way
// Linux's nvme driver does (unit tests only): RAM from GuestMemory::wrap, a FakePciPlatform, a
// temporary disk image; admin and I/O queues in that RAM, completions waited for by polling the
// phase tag (eventually()).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/testing/eventually.h"
#include "base/testing/temp_dir.h"
#include "devices/pci/pci_registers.h"
#include "devices/testing/fake_pci_platform.h"
#include "nvme/nvme_controller.h"
#include "nvme/nvme_spec.h"

namespace tern::nvme::testing {

/// Guest-physical layout of the test RAM.
inline constexpr uint64_t kNvmeRamBytes = 8 << 20;
inline constexpr uint64_t kNvmeAsqGpa = 0x10000, kNvmeAcqGpa = 0x11000;
inline constexpr uint64_t kNvmeDataGpa = 0x400000;  ///< Data buffers (1 MiB).
inline constexpr uint64_t kNvmeBarGpa = 0xE0000000;
inline constexpr uint8_t kNvmeIntxIrq = 11;
/// Ring bases of I/O queue pair `qid` (1..16): SQ, then CQ.
constexpr uint64_t nvme_io_sq_gpa(uint16_t qid) {
  return 0x100000 + qid * 0x10000ull;
}
constexpr uint64_t nvme_io_cq_gpa(uint16_t qid) {
  return nvme_io_sq_gpa(qid) + 0x8000;
}

/// A submission queue entry with every field defaulted to 0, so tests can name only the fields
/// they set (designated initializers) without -Wmissing-field-initializers.
struct NvmeSqe {
  uint8_t opcode = 0;
  uint8_t flags = 0;
  uint16_t cid = 0;
  uint32_t nsid = 0;
  uint32_t cdw2 = 0, cdw3 = 0;
  uint64_t mptr = 0;
  uint64_t prp1 = 0;
  uint64_t prp2 = 0;
  uint32_t cdw10 = 0, cdw11 = 0, cdw12 = 0, cdw13 = 0, cdw14 = 0, cdw15 = 0;
  operator SubmissionEntry() const {  // NOLINT: implicit by design
    return SubmissionEntry{opcode, flags, cid,   nsid,  cdw2,  cdw3,  mptr, prp1,
                           prp2,   cdw10, cdw11, cdw12, cdw13, cdw14, cdw15};
  }
};

/// Status of a CQE as a Status value (SCT/SC and DNR), without the phase tag.
inline Status nvme_cqe_status(const CompletionEntry& e) {
  return Status{
      static_cast<uint16_t>(((e.status >> 1) & 0x7FF) | ((e.status & 0x8000) ? Status::kDnr : 0))};
}

/// The RAM and disk one or more controllers run on.
struct NvmeTestMachine {
  explicit NvmeTestMachine(uint64_t image_bytes = 4 << 20) {
    ram = static_cast<uint8_t*>(std::aligned_alloc(4096, kNvmeRamBytes));
    std::memset(ram, 0, kNvmeRamBytes);
    mem =
        std::make_unique<GuestMemory>(GuestMemory::wrap({MemoryRegion{0, kNvmeRamBytes, ram, 0}}));
    image = dir.path() + "/disk.img";
    int fd = ::open(image.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(image_bytes)), 0);
    ::close(fd);
  }
  ~NvmeTestMachine() { std::free(ram); }
  /// The controller's INTx line as the platform last set it.
  bool intx_level() {
    std::lock_guard lock(platform.mu);
    return platform.levels[kNvmeIntxIrq];
  }
  /// Bytes of the image file at `offset`.
  std::vector<uint8_t> image_bytes(uint64_t offset, size_t n) const {
    std::vector<uint8_t> out(n);
    int fd = ::open(image.c_str(), O_RDONLY);
    EXPECT_EQ(::pread(fd, out.data(), n, static_cast<off_t>(offset)), static_cast<ssize_t>(n));
    ::close(fd);
    return out;
  }
  tern::testing::TempDir dir{"tern-nvme"};
  uint8_t* ram = nullptr;
  std::unique_ptr<GuestMemory> mem;
  FakePciPlatform platform;
  std::string image;
};

/// One queue pair as the host driver keeps it.
struct NvmeHostQueue {
  uint16_t qid = 0;
  uint64_t sq_gpa = 0, cq_gpa = 0;
  uint32_t entries = 0;
  uint32_t sq_tail = 0, cq_head = 0;
  bool phase = true;
  bool shadow = false;  ///< SQ tail goes to the shadow page + the ioeventfd, not MMIO.
};

class NvmeTestDriver {
 public:
  /// Builds the controller on `m` (NvmeDisk::create + make_function + place), memory decoding
  /// and bus mastering on. `config.path` defaults to the machine's image; `engines` (if any)
  /// makes the workers' I/O engines.
  explicit NvmeTestDriver(NvmeTestMachine& m, DiskConfig config = {}, IoEngineFactory engines = {})
      : m_(m) {
    if (config.path.empty()) config.path = m.image;
    config.interface = DiskInterface::kNvme;
    auto disk = NvmeDisk::create(config, "nvme0");
    EXPECT_TRUE(disk) << (disk ? "" : disk.error().message());
    disk_ = *disk;
    disk_->set_io_engine_factory(std::move(engines));
    auto fn = disk_->make_function(PciFunctionServices{m.mem.get(), &m.platform, nullptr});
    EXPECT_TRUE(fn) << (fn ? "" : fn.error().message());
    fn_ = *fn;
    PciPlacement p;
    p.bar_gpa[0] = kNvmeBarGpa;
    p.intx_irq = kNvmeIntxIrq;
    EXPECT_TRUE(fn_->place(p));
    cfg_write16(pci::kCommand, pci::kCommandMemory | pci::kCommandBusMaster);
  }

  PciFunction& fn() { return *fn_; }
  std::shared_ptr<PciFunction> function() { return fn_; }
  NvmeTestMachine& machine() { return m_; }

  // ---- config space ----
  uint32_t cfg_read32(uint32_t off) {
    uint8_t b[4];
    fn_->config_read(off, b);
    uint32_t v;
    std::memcpy(&v, b, 4);
    return v;
  }
  void cfg_write16(uint32_t off, uint16_t v) {
    uint8_t b[2];
    std::memcpy(b, &v, 2);
    fn_->config_write(off, b);
  }
  void cfg_write32(uint32_t off, uint32_t v) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    fn_->config_write(off, b);
  }
  /// Config offset of the MSI-X capability (0: none).
  uint8_t msix_cap() {
    uint8_t p = cfg_read32(pci::kCapabilitiesPointer) & 0xFF;
    while (p) {
      uint32_t h = cfg_read32(p);
      if ((h & 0xFF) == pci::kCapMsix) return p;
      p = (h >> 8) & 0xFF;
    }
    return 0;
  }
  /// Unmasks vectors 0..n-1 with distinct messages and sets MSI-X Enable.
  void enable_msix(uint16_t n) {
    for (uint16_t v = 0; v < n; ++v) {
      bar_write32(kMsixTableOffset + v * 16u, 0xFEE00000);
      bar_write32(kMsixTableOffset + v * 16u + 8, 0x40 + v);
      bar_write32(kMsixTableOffset + v * 16u + 12, 0);  // vector control: unmasked
    }
    uint8_t cap = msix_cap();
    uint32_t h = cfg_read32(cap);
    cfg_write16(cap + 2, static_cast<uint16_t>((h >> 16) | 0x8000));
  }

  // ---- BAR0 ----
  uint32_t reg32(uint64_t off) {
    uint8_t b[4];
    fn_->bar_read(0, off, b);
    uint32_t v;
    std::memcpy(&v, b, 4);
    return v;
  }
  uint64_t reg64(uint64_t off) {
    uint8_t b[8];
    fn_->bar_read(0, off, b);
    uint64_t v;
    std::memcpy(&v, b, 8);
    return v;
  }
  void bar_write32(uint64_t off, uint32_t v) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    fn_->bar_write(0, off, b);
  }
  void bar_write64(uint64_t off, uint64_t v) {
    uint8_t b[8];
    std::memcpy(b, &v, 8);
    fn_->bar_write(0, off, b);
  }

  /// AQA/ASQ/ACQ then CC (EN, IOSQES 6, IOCQES 4), as nvme_pci_configure_admin_queue().
  void start_enable(uint32_t entries = 32, uint64_t asq = kNvmeAsqGpa, uint64_t acq = kNvmeAcqGpa,
                    uint32_t cc_extra = (6u << kCcIosqesShift) | (4u << kCcIocqesShift)) {
    admin_ = NvmeHostQueue{.qid = 0, .sq_gpa = asq, .cq_gpa = acq, .entries = entries};
    std::memset(m_.ram + acq, 0, entries * 16u);
    bar_write32(kRegAqa, (entries - 1) | ((entries - 1) << kAqaAcqsShift));
    bar_write64(kRegAsq, asq);
    bar_write64(kRegAcq, acq);
    bar_write32(kRegCc, kCcEn | cc_extra);
  }
  /// Waits for CSTS.RDY == `rdy` (or CFS when `cfs`).
  bool wait_csts(uint32_t mask, uint32_t want) {
    return tern::testing::eventually([&] { return (reg32(kRegCsts) & mask) == want; });
  }
  bool enable(uint32_t entries = 32) {
    start_enable(entries);
    return wait_csts(kCstsRdy, kCstsRdy);
  }
  /// CC.EN 0 and wait for RDY 0.
  bool disable() {
    bar_write32(kRegCc, reg32(kRegCc) & ~kCcEn);
    return wait_csts(kCstsRdy | kCstsCfs, 0);
  }

  // ---- queues ----
  NvmeHostQueue& admin() { return admin_; }
  /// Writes `sqe` at the SQ tail and rings the tail doorbell (MMIO, or shadow + ioeventfd).
  void submit(NvmeHostQueue& q, NvmeSqe sqe) {
    if (sqe.cid == 0) sqe.cid = next_cid_++;
    const SubmissionEntry e = sqe;
    std::memcpy(m_.ram + q.sq_gpa + uint64_t{q.sq_tail} * 64, &e, 64);
    q.sq_tail = (q.sq_tail + 1) % q.entries;
    ring_sq(q);
  }
  void ring_sq(NvmeHostQueue& q) {
    if (q.shadow) {
      std::memcpy(m_.ram + shadow_gpa_ + shadow_offset(q.qid, false), &q.sq_tail, 4);
      signal_ioeventfd(doorbell_offset(q.qid, false));
    } else {
      bar_write32(doorbell_offset(q.qid, false), q.sq_tail);
    }
  }
  /// What KVM does for a write to an ioeventfd'd doorbell. False: none registered there.
  bool signal_ioeventfd(uint32_t bar_offset) {
    std::lock_guard lock(m_.platform.mu);
    auto it = m_.platform.ioeventfds.find(kNvmeBarGpa + bar_offset);
    if (it == m_.platform.ioeventfds.end()) return false;
    uint64_t one = 1;
    return ::write(it->second.fd, &one, 8) == 8;
  }
  /// The next CQE (waits for its phase tag), then the CQ head doorbell. nullopt on timeout.
  std::optional<CompletionEntry> reap(NvmeHostQueue& q) {
    auto e = consume(q);
    if (e) bar_write32(doorbell_offset(q.qid, true), q.cq_head);
    return e;
  }
  /// The next CQE, its head then given back as Linux's driver does with shadow doorbells
  /// (nvme_ring_cq_doorbell): into the shadow page, and to the MMIO doorbell only when the
  /// controller's CQ EventIdx lies in [old head, new head) (nvme_dbbuf_need_event).
  std::optional<CompletionEntry> reap_shadow(NvmeHostQueue& q) {
    const uint16_t old = static_cast<uint16_t>(q.cq_head);
    auto e = consume(q);
    if (!e) return e;
    const uint16_t now = static_cast<uint16_t>(q.cq_head);
    std::memcpy(m_.ram + shadow_gpa_ + shadow_offset(q.qid, true), &q.cq_head, 4);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // Linux: mb()
    uint32_t ei;
    std::memcpy(&ei, m_.ram + eventidx_gpa_ + shadow_offset(q.qid, true), 4);
    if (static_cast<uint16_t>(now - ei - 1) < static_cast<uint16_t>(now - old))
      bar_write32(doorbell_offset(q.qid, true), q.cq_head);
    return e;
  }
  /// The next CQE (waits for its phase tag), the host's head moved past it; no doorbell.
  std::optional<CompletionEntry> consume(NvmeHostQueue& q) {
    CompletionEntry e;
    const uint64_t at = q.cq_gpa + uint64_t{q.cq_head} * 16;
    bool ok = tern::testing::eventually([&] {
      uint16_t st;
      std::memcpy(&st, m_.ram + at + 14, 2);
      return ((st & 1) != 0) == q.phase;
    });
    if (!ok) return std::nullopt;
    std::atomic_thread_fence(std::memory_order_acquire);
    std::memcpy(&e, m_.ram + at, 16);
    if (++q.cq_head == q.entries) {
      q.cq_head = 0;
      q.phase = !q.phase;
    }
    return e;
  }
  /// True if no CQE is waiting at the head right now.
  bool cq_empty(const NvmeHostQueue& q) const {
    uint16_t st;
    std::memcpy(&st, m_.ram + q.cq_gpa + uint64_t{q.cq_head} * 16 + 14, 2);
    return ((st & 1) != 0) != q.phase;
  }
  std::optional<CompletionEntry> run(NvmeHostQueue& q, NvmeSqe sqe) {
    submit(q, sqe);
    return reap(q);
  }
  /// Runs an admin command; its status (kInternalError if no completion came).
  Status admin_cmd(NvmeSqe sqe, uint32_t* dw0 = nullptr) {
    auto e = run(admin_, sqe);
    if (!e) return Status{0x7FF};
    if (dw0) *dw0 = e->dw0;
    return nvme_cqe_status(*e);
  }

  Status create_cq(uint16_t qid, uint32_t entries, uint16_t iv = 0, uint32_t flags = 3,
                   std::optional<uint64_t> gpa = {}) {
    const uint64_t at = gpa.value_or(nvme_io_cq_gpa(qid)), len = entries * 16ull;
    if (at < kNvmeRamBytes && len <= kNvmeRamBytes - at) std::memset(m_.ram + at, 0, len);
    return admin_cmd(NvmeSqe{.opcode = kAdminCreateIoCq,
                             .prp1 = gpa.value_or(nvme_io_cq_gpa(qid)),
                             .cdw10 = qid | ((entries - 1) << 16),
                             .cdw11 = flags | (uint32_t{iv} << 16)});
  }
  Status create_sq(uint16_t qid, uint32_t entries, uint16_t cqid, uint32_t flags = 1,
                   std::optional<uint64_t> gpa = {}) {
    return admin_cmd(NvmeSqe{.opcode = kAdminCreateIoSq,
                             .prp1 = gpa.value_or(nvme_io_sq_gpa(qid)),
                             .cdw10 = qid | ((entries - 1) << 16),
                             .cdw11 = flags | (uint32_t{cqid} << 16)});
  }
  /// Creates CQ and SQ `qid` (vector `iv`) and returns the host's view of the pair.
  NvmeHostQueue create_pair(uint16_t qid, uint32_t entries, uint16_t iv) {
    EXPECT_EQ(create_cq(qid, entries, iv), kSuccess);
    EXPECT_EQ(create_sq(qid, entries, qid), kSuccess);
    return NvmeHostQueue{.qid = qid,
                         .sq_gpa = nvme_io_sq_gpa(qid),
                         .cq_gpa = nvme_io_cq_gpa(qid),
                         .entries = entries};
  }
  /// Read or Write of `blocks` 512-byte blocks at `slba` to/from kNvmeDataGpa (+ `buf_off`).
  Status rw(NvmeHostQueue& q, bool write, uint64_t slba, uint32_t blocks, uint64_t buf_off = 0) {
    uint64_t buf = kNvmeDataGpa + buf_off;
    uint64_t len = uint64_t{blocks} * 512;
    NvmeSqe e{.opcode = write ? uint8_t{kIoWrite} : uint8_t{kIoRead},
              .nsid = 1,
              .prp1 = buf,
              .cdw10 = static_cast<uint32_t>(slba),
              .cdw11 = static_cast<uint32_t>(slba >> 32),
              .cdw12 = blocks - 1};
    if (len > 4096 && len <= 8192) {
      e.prp2 = buf + 4096;
    } else if (len > 8192) {  // a PRP list at the end of the data area
      const uint64_t list = kNvmeDataGpa + 0xFF000;
      for (uint64_t i = 1; i * 4096 < len; ++i) {
        uint64_t page = buf + i * 4096;
        std::memcpy(m_.ram + list + (i - 1) * 8, &page, 8);
      }
      e.prp2 = list;
    }
    auto c = run(q, e);
    return c ? nvme_cqe_status(*c) : Status{0x7FF};
  }
  uint8_t* data(uint64_t off = 0) { return m_.ram + kNvmeDataGpa + off; }

  /// The Doorbell Buffer Config pages the host gave (EventIdx: the page after the shadow one
  /// unless named).
  void set_shadow_gpa(uint64_t gpa, uint64_t eventidx_gpa = 0) {
    shadow_gpa_ = gpa;
    eventidx_gpa_ = eventidx_gpa ? eventidx_gpa : gpa + 4096;
  }
  /// Doorbell Buffer Config with the shadow page at `gpa` and EventIdx the page after it (both
  /// zeroed first); its status.
  Status doorbell_buffer_config(uint64_t gpa) {
    std::memset(m_.ram + gpa, 0, 8192);
    set_shadow_gpa(gpa);
    return admin_cmd({.opcode = kAdminDoorbellBufferConfig, .prp1 = gpa, .prp2 = gpa + 4096});
  }
  /// A device-wide counter by name (0 if absent).
  uint64_t counter(std::string_view name) {
    for (auto& [n, v] : fn_->counters().counters)
      if (n == name) return v;
    return 0;
  }

 private:
  NvmeTestMachine& m_;
  std::shared_ptr<NvmeDisk> disk_;
  std::shared_ptr<PciFunction> fn_;
  NvmeHostQueue admin_;
  uint16_t next_cid_ = 1;
  uint64_t shadow_gpa_ = 0;
  uint64_t eventidx_gpa_ = 0;
};

}  // namespace tern::nvme::testing
