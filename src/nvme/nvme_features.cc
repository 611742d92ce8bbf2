// Set Features / Get Features (NVMe base spec 1.4 §5.21, §5.9, §5.21.1) and Get Log Page
// (§5.14) on the admin thread. Features are stored and reported; none is saveable. Volatile Write
// Cache is honoured: turning it off flushes the image, and with WCE 0 the I/O workers make every
// write durable before completing it (a flush after it; nvme_io_worker_loop.cc). Interrupt
// Coalescing is reported, not honoured: completions are never delayed.
#include <algorithm>
#include <cstring>

#include "nvme/nvme_controller_impl.h"
#include "nvme/prp.h"

namespace tern::nvme {

namespace {
constexpr uint32_t kSaveBit = 1u << 31;           // Set Features CDW10 SV
constexpr uint32_t kFeatureChangeable = 1u << 2;  // Get Features SEL 011b: changeable
constexpr uint32_t kRaeBit = 1u << 15;            // Get Log Page CDW10 Retain Asynchronous Event
}  // namespace

Status NvmeController::admin_set_features(const SubmissionEntry& sqe, uint32_t& dw0) {
  const uint8_t fid = sqe.cdw10 & 0xFF;
  const uint32_t v = sqe.cdw11;
  FeatureValues& f = features_;
  if (sqe.cdw10 & kSaveBit) return kFeatureNotSaveable;  // nothing is saveable (as QEMU)
  switch (fid) {
    case kFeatArbitration:
      f.arbitration = v;
      break;
    case kFeatPowerManagement:
      if ((v & 0x1F) != 0) return kInvalidField;  // one power state (PS 0)
      f.power_management = v & 0xFF;
      break;
    case kFeatTemperatureThreshold: {
      const uint32_t tmpsel = (v >> 16) & 0xF, thsel = (v >> 20) & 3;
      if (tmpsel != 0 || thsel > 1) return kInvalidField;  // composite temperature only
      (thsel == 0 ? f.temp_over : f.temp_under) = static_cast<uint16_t>(v);
      break;
    }
    case kFeatErrorRecovery:
      if (v & (1u << 16)) return kInvalidField;  // DULBE: no deallocated-block errors
      f.error_recovery = v & 0xFFFF;
      break;
    case kFeatVolatileWriteCache: {
      if (!info_.volatile_write_cache) return kInvalidField;  // VWC 0 (cache=directsync)
      const bool was_on = f.volatile_write_cache;
      f.volatile_write_cache = v & 1;
      write_cache_enabled_.store(f.volatile_write_cache, std::memory_order_release);
      // Turned off: the host sends no flushes from now on, so what the cache holds (writes it
      // completed with the cache on) is made durable before the command completes. Stored first,
      // then flushed: a write completing after the store flushes itself (nvme_io_worker_loop.cc),
      // one completed before it is in this flush.
      if (was_on && !f.volatile_write_cache && disk_->disk().cache() != CacheMode::kUnsafe) {
        io_counters_.flushes.fetch_add(1, std::memory_order_relaxed);
        if (auto r = disk_->disk().flush(); !r) {
          TERN_LOG_RATELIMITED(log_limit_, warn, "{}: write cache flush: {}", name(),
                               r.error().message());
          return kInternalError;  // WCE stays 0: every later write is flushed
        }
      }
      break;
    }
    case kFeatNumberOfQueues: {
      const uint32_t nsqr = v & 0xFFFF, ncqr = v >> 16;
      if (nsqr == 0xFFFF || ncqr == 0xFFFF) return kInvalidField;
      if (io_queue_count() > 0) return kCommandSequenceError;  // §5.21.1.7: before any I/O queue
      f.sq_allocated = static_cast<uint16_t>(std::min<uint32_t>(nsqr + 1, kMaxIoQueues));
      f.cq_allocated = static_cast<uint16_t>(std::min<uint32_t>(ncqr + 1, kMaxIoQueues));
      f.queues_set = true;
      break;
    }
    case kFeatInterruptCoalescing:
      f.interrupt_coalescing = v & 0xFFFF;
      break;
    case kFeatInterruptVectorConfig: {
      const uint32_t iv = v & 0xFFFF;
      const bool cd = v & (1u << 16);
      if (iv >= kMsixVectors || (iv == 0 && cd)) return kInvalidField;
      f.vector_config[iv] = cd ? 1u << 16 : 0;
      break;
    }
    case kFeatWriteAtomicity:
      f.write_atomicity = v & 1;
      break;
    case kFeatAsyncEventConfig:
      f.async_event_config = v & 0x3FF;
      break;
    default:
      return kInvalidField;
  }
  if (fid == kFeatNumberOfQueues)
    dw0 = (uint32_t{f.cq_allocated - 1u} << 16) | (f.sq_allocated - 1u);
  return kSuccess;
}

Status NvmeController::admin_get_features(const SubmissionEntry& sqe, uint32_t& dw0) {
  const uint8_t fid = sqe.cdw10 & 0xFF;
  const uint32_t sel = (sqe.cdw10 >> 8) & 7;
  if (sel > 3) return kInvalidField;
  static const FeatureValues kDefaults{};
  const FeatureValues& f = sel == 0 ? features_ : kDefaults;  // saved = default: not saveable
  uint32_t v = 0;
  switch (fid) {
    case kFeatArbitration:
      v = f.arbitration;
      break;
    case kFeatPowerManagement:
      v = f.power_management;
      break;
    case kFeatTemperatureThreshold: {
      const uint32_t tmpsel = (sqe.cdw11 >> 16) & 0xF, thsel = (sqe.cdw11 >> 20) & 3;
      if (tmpsel != 0 || thsel > 1) return kInvalidField;
      v = (thsel == 0 ? f.temp_over : f.temp_under) | (thsel << 20);
      break;
    }
    case kFeatErrorRecovery:
      v = f.error_recovery;
      break;
    case kFeatVolatileWriteCache:
      v = info_.volatile_write_cache && f.volatile_write_cache;
      break;
    case kFeatNumberOfQueues:
      v = (uint32_t{f.cq_allocated - 1u} << 16) | (f.sq_allocated - 1u);
      break;
    case kFeatInterruptCoalescing:
      v = f.interrupt_coalescing;
      break;
    case kFeatInterruptVectorConfig: {
      const uint32_t iv = sqe.cdw11 & 0xFFFF;
      if (iv >= kMsixVectors) return kInvalidField;
      v = iv | f.vector_config[iv];
      break;
    }
    case kFeatWriteAtomicity:
      v = f.write_atomicity;
      break;
    case kFeatAsyncEventConfig:
      v = f.async_event_config;
      break;
    default:
      return kInvalidField;
  }
  dw0 = sel == 3 ? kFeatureChangeable : v;
  return kSuccess;
}

HealthCounters NvmeController::health() const {
  auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  // Data units: thousands of 512-byte units, rounded up (§5.14.1.2).
  auto units = [](uint64_t bytes) { return (bytes / 512 + 999) / 1000; };
  HealthCounters h;
  h.data_units_read = units(ld(io_counters_.read_bytes));
  h.data_units_written = units(ld(io_counters_.written_bytes));
  h.host_read_commands = ld(io_counters_.reads);
  h.host_write_commands = ld(io_counters_.writes);
  h.media_errors = ld(io_counters_.media_errors);
  h.power_on_hours = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::hours>(std::chrono::steady_clock::now() - created_)
          .count());
  return h;
}

Status NvmeController::admin_get_log_page(const SubmissionEntry& sqe) {
  const uint8_t lid = sqe.cdw10 & 0xFF;
  const uint64_t numd = ((uint64_t{sqe.cdw11 & 0xFFFF} << 16) | (sqe.cdw10 >> 16)) + 1;
  const uint64_t len = numd * 4;
  const uint64_t lpo = (uint64_t{sqe.cdw13} << 32) | sqe.cdw12;
  if (lpo % 4 != 0) return kInvalidField;
  if (len > limits_.max_transfer_bytes) return kInvalidField;  // bounds what we allocate
  auto page = log_page(lid, info_, health());
  if (!page) return page.error();
  if (lpo > page->size()) return kInvalidField;
  std::vector<uint8_t> out(len, 0);  // past the page: zeros
  const uint64_t n = std::min<uint64_t>(len, page->size() - lpo);
  std::memcpy(out.data(), page->data() + lpo, n);
  auto r = write_prps(mem_, sqe.prp1, sqe.prp2, out, limits_);
  if (!r) return r.error();
  if (!(sqe.cdw10 & kRaeBit)) {
    // Reading the page re-arms its event type (§5.2): Error → type 0, SMART → type 1.
    std::lock_guard lock(mu_);
    if (lid == kLogError) masked_event_types_ &= ~1u;
    if (lid == kLogSmartHealth) masked_event_types_ &= ~2u;
  }
  return kSuccess;
}

}  // namespace tern::nvme
