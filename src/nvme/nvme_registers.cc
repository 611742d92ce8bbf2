// NvmeController registers (NVMe base spec 1.4 §3.1) and doorbells (§3.1.24, §3.1.25), on vCPU
// threads. A CC write that enables, disables or shuts down only records the request for the
// admin thread (nvme_admin_thread.cc).
#include <cstring>

#include "nvme/nvme_controller_impl.h"

namespace tern::nvme {

namespace {

constexpr uint64_t kCap = (kMaxQueueEntries - 1) | kCapCqr | (uint64_t{30} << kCapToShift) |
                          (uint64_t{0} << kCapDstrdShift) | kCapCssNvm |
                          (uint64_t{0} << kCapMpsminShift) | (uint64_t{0} << kCapMpsmaxShift);
/// CC bits the host may write: EN, CSS, MPS, AMS, SHN, IOSQES, IOCQES.
constexpr uint32_t kCcWritable = 0x00FFFFF1;
/// CSS, MPS and AMS: fixed while the controller is enabled (§3.1.5).
constexpr uint32_t kCcFixedWhileEnabled = 0x00003FF0;
constexpr uint32_t kShnMask = 3u << kCcShnShift;
constexpr uint32_t kShstMask = 3u << kCstsShstShift;

}  // namespace

void NvmeController::reg_read_locked(uint64_t offset, std::span<uint8_t> data) {
  auto reg32 = [this](uint64_t off) -> uint32_t {
    switch (off) {
      case kRegCap:
        return static_cast<uint32_t>(kCap);
      case kRegCap + 4:
        return static_cast<uint32_t>(kCap >> 32);
      case kRegVs:
        return kVersion14;
      case kRegIntms:
      case kRegIntmc:
        return intms_;
      case kRegCc:
        return cc_;
      case kRegCsts:
        return csts_;
      case kRegAqa:
        return aqa_;
      case kRegAsq:
        return static_cast<uint32_t>(asq_);
      case kRegAsq + 4:
        return static_cast<uint32_t>(asq_ >> 32);
      case kRegAcq:
        return static_cast<uint32_t>(acq_);
      case kRegAcq + 4:
        return static_cast<uint32_t>(acq_ >> 32);
      default:
        return 0;  // reserved, NSSR (not supported), CMB/PMR registers (absent)
    }
  };
  if (data.size() == 4 && offset % 4 == 0) {
    uint32_t v = reg32(offset);
    std::memcpy(data.data(), &v, 4);
  } else if (data.size() == 8 && (offset == kRegCap || offset == kRegAsq || offset == kRegAcq)) {
    uint64_t v = reg32(offset) | (uint64_t{reg32(offset + 4)} << 32);
    std::memcpy(data.data(), &v, 8);
  }  // other widths and alignments read 0
}

void NvmeController::reg_write_locked(uint64_t offset, uint32_t width, uint64_t value) {
  const bool enabled = cc_ & kCcEn;
  auto set_half = [&](uint64_t& reg, uint64_t base) {
    if (enabled) return protocol_error("admin queue base written while enabled", offset, value);
    if (width == 8) {
      reg = value;
    } else {
      unsigned shift = offset == base ? 0 : 32;
      reg = (reg & ~(uint64_t{0xFFFFFFFF} << shift)) | (value << shift);
    }
  };
  if (width == 8) {
    if (offset == kRegAsq) return set_half(asq_, kRegAsq);
    if (offset == kRegAcq) return set_half(acq_, kRegAcq);
    return protocol_error("8-byte write to a 32-bit or read-only register", offset, value);
  }
  if (width != 4 || offset % 4 != 0)
    return protocol_error("register write of a width other than 4 or 8", offset, value);
  const uint32_t v = static_cast<uint32_t>(value);
  switch (offset) {
    case kRegIntms:
    case kRegIntmc:
      // §3.1.3: the host does not use these with MSI-X.
      if (msix_->enabled()) return protocol_error("INTMS/INTMC write with MSI-X on", offset, v);
      if (offset == kRegIntms)
        intms_ |= v;
      else
        intms_ &= ~v;
      intx_update_locked();
      return;
    case kRegCc:
      return write_cc_locked(v);
    case kRegAqa:
      if (enabled) return protocol_error("AQA written while enabled", offset, v);
      aqa_ = v & (kAqaAsqsMask | (kAqaAsqsMask << kAqaAcqsShift));
      return;
    case kRegAsq:
    case kRegAsq + 4:
      return set_half(asq_, kRegAsq);
    case kRegAcq:
    case kRegAcq + 4:
      return set_half(acq_, kRegAcq);
    default:
      return protocol_error("write to a read-only or reserved register", offset, v);
  }
}

void NvmeController::write_cc_locked(uint32_t value) {
  const uint32_t old = cc_;
  uint32_t v = value & kCcWritable;
  if ((old & kCcEn) && (v & kCcEn)) v = (v & ~kCcFixedWhileEnabled) | (old & kCcFixedWhileEnabled);
  cc_ = v;
  if (!(old & kCcEn) && (v & kCcEn)) requests_ |= kReqEnable;
  if ((old & kCcEn) && !(v & kCcEn)) requests_ |= kReqDisable;
  if ((v & kCcEn) && (v & kShnMask) && !(old & kShnMask) &&
      ((csts_ & kShstMask) >> kCstsShstShift) == kShstNormal) {
    // §7.6.2: Shutdown Status "occurring" at once; the admin thread completes it.
    csts_ = (csts_ & ~kShstMask) | (kShstOccurring << kCstsShstShift);
    requests_ |= kReqShutdown;
  }
  admin_cv_.notify_all();
}

void NvmeController::doorbell_write(uint64_t offset, std::span<const uint8_t> data) {
  uint32_t value = 0;
  std::memcpy(&value, data.data(), std::min<size_t>(data.size(), 4));
  if (data.size() != 4 || offset % 4 != 0)
    return protocol_error("doorbell write not 4 bytes wide and aligned", offset, value);
  const uint32_t index = static_cast<uint32_t>(offset - kRegDoorbells) / kDoorbellStride;
  const uint32_t qid = index / 2;
  const bool completion = index & 1;
  // Invalid Doorbell Register (info 00h) or Invalid Doorbell Write Value (01h), §5.2.
  auto invalid = [&](uint8_t info, const char* what) {
    invalid_doorbells_.fetch_add(1, std::memory_order_relaxed);
    TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {} (queue {}, {}, value {}): ignored", name(), what,
                         qid, completion ? "CQ head" : "SQ tail", value);
    post_async_event(async_event_dw0(0, info, kLogError));
  };
  if (qid == 0) {
    queue_counters_[0].doorbell_writes.fetch_add(1, std::memory_order_relaxed);
    bool bad_value = false;
    {
      std::lock_guard lock(mu_);
      if (!admin_enabled_) {
        invalid_doorbells_.fetch_add(1, std::memory_order_relaxed);
        return;  // no admin queue yet: no event can be reported either
      }
      const uint32_t entries =
          completion ? ((aqa_ >> kAqaAcqsShift) & kAqaAsqsMask) + 1 : (aqa_ & kAqaAsqsMask) + 1;
      if (value >= entries) {
        bad_value = true;
      } else if (completion) {
        admin_cq_head_ = value;
        intx_cq_head_locked(0, value);
      } else {
        admin_sq_tail_ = value;
      }
      admin_cv_.notify_all();
    }
    if (bad_value) invalid(1, "admin doorbell value past the queue size");
    return;
  }
  bool found = false;
  if (qid <= kMaxIoQueues) {
    std::shared_lock lock(dispatch_mu_);
    NvmeIoWorker* w = completion ? dispatch_.cq[qid] : dispatch_.sq[qid];
    if (w) {
      found = true;
      if (completion)
        w->cq_doorbell(value);
      else
        w->sq_doorbell(static_cast<uint16_t>(qid), value);
    }
  }
  if (!found) return invalid(0, "doorbell of a queue that does not exist");
  if (completion) {
    std::lock_guard lock(mu_);
    intx_cq_head_locked(static_cast<uint16_t>(qid), value);
  }
}

void NvmeController::move_ioeventfds_locked() {
  std::optional<uint64_t> want = config_.bar_address(0);
  if (want == ioeventfd_bar_) return;
  for (const auto& [qid, fd] : ioeventfds_) {
    const uint32_t off = doorbell_offset(qid, false);
    if (ioeventfd_bar_) {
      auto r = platform_.set_ioeventfd(*ioeventfd_bar_ + off, 4, BorrowedFd(fd), false);
      if (!r) TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {}", name(), r.error().message());
    }
    if (want) {
      // On failure the doorbell still works as an MMIO exit (doorbell_write).
      auto r = platform_.set_ioeventfd(*want + off, 4, BorrowedFd(fd), true);
      if (!r) TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {}", name(), r.error().message());
    }
  }
  ioeventfd_bar_ = want;
}

void NvmeController::set_sq_ioeventfd_locked(uint16_t qid, BorrowedFd fd, bool assign) {
  auto it = ioeventfds_.find(qid);
  if (!assign && it == ioeventfds_.end()) return;
  if (assign && it != ioeventfds_.end()) return;
  if (ioeventfd_bar_) {
    auto r = platform_.set_ioeventfd(*ioeventfd_bar_ + doorbell_offset(qid, false), 4,
                                     assign ? fd : BorrowedFd(it->second), assign);
    if (!r) TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {}", name(), r.error().message());
  }
  if (assign)
    ioeventfds_[qid] = fd.get();
  else
    ioeventfds_.erase(it);
}

}  // namespace tern::nvme
