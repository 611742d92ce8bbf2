// A host for NvmeIoWorker tests: a vector as guest RAM holding one SQ / CQ pair and data pages, a
// temporary disk image, a counting interrupt sink, and the host side of the queue protocol
// (writing SQEs, ringing doorbells, polling CQEs by phase tag).
#pragma once

#include <sys/eventfd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/testing/eventually.h"
#include "base/testing/temp_dir.h"
#include "nvme/nvme_io_worker.h"

namespace tern::nvme::testing {

/// Counts signals per CQ.
class NvmeCountingSink : public InterruptSink {
 public:
  void signal(uint16_t, uint16_t vector) override {
    last_vector = vector;
    count.fetch_add(1);
  }
  std::atomic<uint64_t> count{0};
  std::atomic<uint16_t> last_vector{0};
};

class NvmeIoWorkerFixture : public ::testing::Test {
 protected:
  static constexpr uint64_t kRamBytes = 2 * 1024 * 1024;
  static constexpr uint64_t kSqGpa = 0x1000;     // up to 64 entries * 64 bytes = 4 pages
  static constexpr uint64_t kCqGpa = 0x10000;
  static constexpr uint64_t kShadowGpa = 0x20000;
  static constexpr uint64_t kEventIdxGpa = 0x21000;
  static constexpr uint64_t kDataGpa = 0x100000;  // data page i at kDataGpa + i * 4096
  static constexpr uint64_t kDiskBytes = 1024 * 1024;
  static constexpr uint16_t kQid = 1;

  NvmeIoWorkerFixture()
      : ram_(kRamBytes, 0), mem_(GuestMemory::wrap({MemoryRegion{0, ram_.size(), ram_.data(), 0}})) {}

  /// Creates the disk image (filled with `fill`) and a worker with one SQ of `sq_entries` and a
  /// CQ of `cq_entries` (qid 1, vector 3).
  void start(IoEngineKind engine = IoEngineKind::kThreads, uint32_t sq_entries = 64,
             uint32_t cq_entries = 64, CacheMode cache = CacheMode::kWriteback,
             ShadowDoorbells shadow = {}) {
    ASSERT_FALSE(dir_.path().empty());
    disk_.reset();  // a previous start's image goes first: it holds the image's lock
    path_ = dir_.path() + "/disk.img";
    std::ofstream(path_, std::ios::binary) << std::string(kDiskBytes, '\0');
    DiskConfig c;
    c.path = path_;
    c.cache = cache;
    c.engine = engine;
    auto d = DiskImage::open(c);
    ASSERT_TRUE(d) << d.error().message();
    disk_.emplace(std::move(*d));
    ctx_.mem = &mem_;
    ctx_.disk = &*disk_;
    ctx_.config = c;
    ctx_.ns.size_lbas = kDiskBytes / 512;
    ctx_.interrupts = &sink_;
    ctx_.counters = counters_.data();
    ctx_.executor_counters = &exec_counters_;
    ctx_.log_limit = &limit_;
    ctx_.name = "nvme0/cq1";  // as the controller names a worker (IoWorkerContext::name)
    ctx_.async_event = [this](uint32_t dw0) {
      std::lock_guard lock(events_mu_);
      events_.push_back(dw0);
    };
    cq_config_ = CqConfig{kQid, kCqGpa, cq_entries, 3, true};
    sq_config_ = SqConfig{kQid, kSqGpa, sq_entries, kQid};
    shadow_ = shadow;
    make_worker();
  }
  /// A fresh worker over the same RAM, disk and queues (snapshot restore).
  void make_worker() {
    auto w = NvmeIoWorker::create(ctx_, cq_config_, shadow_);
    ASSERT_TRUE(w) << w.error().message();
    worker_ = std::move(*w);
    auto efd = make_eventfd(0, EFD_NONBLOCK);
    ASSERT_TRUE(efd);
    ASSERT_TRUE(worker_->add_sq(sq_config_, std::move(*efd)));
  }

  uint8_t* data(unsigned page) { return ram_.data() + kDataGpa + page * 4096u; }
  static uint64_t data_gpa(unsigned page) { return kDataGpa + page * 4096u; }

  /// A Read / Write of `blocks` 512-byte LBAs at `slba` into data page `page` (≤ 8 blocks).
  static SubmissionEntry rw(uint8_t opcode, uint16_t cid, uint64_t slba, uint32_t blocks,
                            unsigned page) {
    SubmissionEntry e{};
    e.opcode = opcode;
    e.cid = cid;
    e.nsid = 1;
    e.prp1 = data_gpa(page);
    e.cdw10 = static_cast<uint32_t>(slba);
    e.cdw11 = static_cast<uint32_t>(slba >> 32);
    e.cdw12 = blocks - 1;
    return e;
  }
  static SubmissionEntry flush(uint16_t cid) {
    SubmissionEntry e{};
    e.opcode = kIoFlush;
    e.cid = cid;
    e.nsid = 1;
    return e;
  }

  /// Writes `e` at the host's SQ tail and advances it (no doorbell).
  void queue(const SubmissionEntry& e) {
    std::memcpy(ram_.data() + kSqGpa + sq_tail_ * 64u, &e, sizeof e);
    sq_tail_ = (sq_tail_ + 1) % sq_config_.entries;
  }
  void ring() { worker_->sq_doorbell(kQid, sq_tail_); }
  void submit(const SubmissionEntry& e) {
    queue(e);
    ring();
  }

  CompletionEntry cqe_at(uint32_t slot) {
    CompletionEntry c;
    std::memcpy(&c, ram_.data() + kCqGpa + slot * 16u, sizeof c);
    return c;
  }
  /// True if the CQE at the host's head carries the expected phase tag.
  bool cqe_ready() {
    auto* p = reinterpret_cast<uint16_t*>(ram_.data() + kCqGpa + cq_head_ * 16u + 14);
    uint16_t status = std::atomic_ref<uint16_t>(*p).load(std::memory_order_acquire);
    return (status & 1) == (cq_phase_ ? 1 : 0);
  }
  /// The host's side of a shadow doorbell write (then a full fence, as Linux's driver does
  /// before it reads EventIdx).
  void host_store32(uint64_t gpa, uint32_t v) {
    std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(ram_.data() + gpa))
        .store(v, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  uint32_t host_load32(uint64_t gpa) {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(ram_.data() + gpa))
        .load(std::memory_order_acquire);
  }
  /// Writes this SQ's shadow tail (`completion` false) or CQ's shadow head.
  void shadow(bool completion, uint32_t v) {
    host_store32(kShadowGpa + shadow_offset(kQid, completion), v);
  }
  uint32_t eventidx(bool completion) {
    return host_load32(kEventIdxGpa + shadow_offset(kQid, completion));
  }
  /// Waits for the next CQE and consumes it (no doorbell); nullopt on timeout.
  std::optional<CompletionEntry> next() {
    if (!tern::testing::eventually([&] { return cqe_ready(); })) return std::nullopt;
    CompletionEntry c = cqe_at(cq_head_);
    if (++cq_head_ == cq_config_.entries) {
      cq_head_ = 0;
      cq_phase_ = !cq_phase_;
    }
    return c;
  }
  /// Waits for the next CQE, consumes it and rings the CQ head doorbell.
  std::optional<CompletionEntry> complete() {
    auto c = next();
    if (c) worker_->cq_doorbell(cq_head_);
    return c;
  }
  static Status status_of(const CompletionEntry& c) {
    return Status{static_cast<uint16_t>(((c.status >> 1) & 0x7FF) |
                                        ((c.status & 0x8000) ? Status::kDnr : 0))};
  }

  std::vector<uint8_t> disk_bytes(uint64_t offset, size_t len) {
    std::ifstream f(path_, std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    std::vector<uint8_t> out(len);
    f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(len));
    return out;
  }
  void write_disk(uint64_t offset, const std::vector<uint8_t>& bytes) {
    std::fstream f(path_, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::vector<uint32_t> events() {
    std::lock_guard lock(events_mu_);
    return events_;
  }
  QueueCounters& q(uint16_t qid = kQid) { return counters_[qid]; }

  std::vector<uint8_t> ram_;
  GuestMemory mem_;
  tern::testing::TempDir dir_;
  std::string path_;
  std::optional<DiskImage> disk_;
  NvmeCountingSink sink_;
  std::array<QueueCounters, 65> counters_;
  BlockExecutorCounters exec_counters_;
  RateLimit limit_{1000};
  std::mutex events_mu_;
  std::vector<uint32_t> events_;
  IoWorkerContext ctx_;
  CqConfig cq_config_;
  SqConfig sq_config_;
  ShadowDoorbells shadow_;
  std::unique_ptr<NvmeIoWorker> worker_;
  uint32_t sq_tail_ = 0;
  uint32_t cq_head_ = 0;
  bool cq_phase_ = true;
};

}  // namespace tern::nvme::testing
