// The admin command set on the admin thread (NVMe base spec 1.4 §5): Identify, Create/Delete I/O
// Submission and Completion Queue, Abort, Asynchronous Event Request, Keep Alive, Doorbell Buffer
// Config. Set/Get Features and Get Log Page are in nvme_features.cc.
#include <sys/eventfd.h>

#include "nvme/nvme_controller_impl.h"
#include "nvme/prp.h"

namespace tern::nvme {

namespace {
constexpr uint16_t qid_of(uint32_t cdw10) {
  return static_cast<uint16_t>(cdw10 & 0xFFFF);
}
/// QSIZE + 1: CDW10 31:16 is 0's based.
constexpr uint32_t entries_of(uint32_t cdw10) {
  return (cdw10 >> 16) + 1;
}
}  // namespace

Status NvmeController::execute_admin(const SubmissionEntry& sqe, uint32_t& dw0, bool& hold) {
  if (sqe.flags != 0) return kInvalidField;  // fused commands and SGLs are not supported
  switch (sqe.opcode) {
    case kAdminIdentify:
      return admin_identify(sqe);
    case kAdminCreateIoCq:
      return admin_create_cq(sqe);
    case kAdminCreateIoSq:
      return admin_create_sq(sqe);
    case kAdminDeleteIoCq:
      return admin_delete_cq(sqe);
    case kAdminDeleteIoSq:
      return admin_delete_sq(sqe);
    case kAdminSetFeatures:
      return admin_set_features(sqe, dw0);
    case kAdminGetFeatures:
      return admin_get_features(sqe, dw0);
    case kAdminGetLogPage:
      return admin_get_log_page(sqe);
    case kAdminDoorbellBufferConfig:
      return admin_doorbell_buffer_config(sqe);
    case kAdminAbort:
      dw0 = 1;  // best effort: "command not aborted" (§5.1)
      return kSuccess;
    case kAdminKeepAlive:
      return kSuccess;
    case kAdminAsyncEventRequest:
      if (aers_.size() >= kAerLimit) return kAsyncEventLimitExceeded;
      hold = true;
      return kSuccess;
    default:
      return kInvalidOpcode;
  }
}

Status NvmeController::admin_identify(const SubmissionEntry& sqe) {
  const uint8_t cns = sqe.cdw10 & 0xFF;
  const uint32_t nsid = sqe.nsid;
  std::array<uint8_t, kIdentifyBytes> data;
  switch (cns) {
    case kCnsNamespace:
      if (nsid != 1 && nsid != 0xFFFFFFFF) return kInvalidNamespace;
      data = identify_namespace(info_);
      break;
    case kCnsController:
      data = identify_controller(info_);
      break;
    case kCnsActiveNamespaceList:
      if (nsid >= 0xFFFFFFFE) return kInvalidNamespace;
      data = identify_active_namespaces(nsid);
      break;
    case kCnsNamespaceDescriptorList:
      if (nsid != 1) return kInvalidNamespace;
      data = identify_ns_descriptors(info_);
      break;
    default:
      return kInvalidField;
  }
  auto r = write_prps(mem_, sqe.prp1, sqe.prp2, data, limits_);
  return r ? kSuccess : r.error();
}

uint32_t NvmeController::io_queue_count() const {
  uint32_t n = 0;
  for (uint16_t q = 1; q <= kMaxIoQueues; ++q)
    n += (cqs_[q].worker != nullptr) + sqs_[q].has_value();
  return n;
}

void NvmeController::publish_cq(uint16_t qid, NvmeIoWorker* w, const CqConfig* cq) {
  {
    std::unique_lock lock(dispatch_mu_);
    dispatch_.cq[qid] = w;
  }
  std::lock_guard lock(mu_);
  intx_cq_[qid] = cq ? IntxCq{.exists = true,
                              .gpa = cq->gpa,
                              .entries = cq->entries,
                              .vector = cq->vector,
                              .ien = cq->interrupts_enabled}
                     : IntxCq{};
}

Status NvmeController::admin_create_cq(const SubmissionEntry& sqe) {
  const uint16_t qid = qid_of(sqe.cdw10);
  const uint32_t entries = entries_of(sqe.cdw10);
  const bool pc = sqe.cdw11 & 1, ien = sqe.cdw11 & 2;
  const uint32_t iv = sqe.cdw11 >> 16;
  uint32_t iocqes;
  ShadowDoorbells shadow;
  {
    std::lock_guard lock(mu_);
    iocqes = (cc_ >> kCcIocqesShift) & 0xF;
    shadow = shadow_;
  }
  // §7.6.2: after a shutdown I/O stays stopped until a reset (every worker is paused).
  if (shut_down_) return kCommandSequenceError;
  if (qid == 0 || qid > features_.cq_allocated || cqs_[qid].worker) return kInvalidQueueIdentifier;
  if (entries < 2 || entries > kMaxQueueEntries) return kInvalidQueueSize;
  if (!pc) return kInvalidField;  // CAP.CQR: physically contiguous queues only
  if (iv >= kMsixVectors) return kInvalidInterruptVector;
  if (iocqes != kCqEntryShift) return kInvalidField;
  if (!ring_in_ram(mem_, sqe.prp1, entries, kCqEntryShift, limits_.page_size)) return kInvalidField;
  CqConfig cq{.qid = qid,
              .gpa = sqe.prp1,
              .entries = entries,
              .vector = static_cast<uint16_t>(iv),
              .interrupts_enabled = ien};
  auto w = NvmeIoWorker::create(worker_context(qid), cq, shadow);
  if (!w) {
    TERN_LOG_RATELIMITED(log_limit_, warn, "{}: Create I/O CQ {}: {}", name(), qid,
                         w.error().message());
    return kInternalError;
  }
  cqs_[qid].worker = std::move(*w);
  publish_cq(qid, cqs_[qid].worker.get(), &cq);
  return kSuccess;
}

Status NvmeController::admin_create_sq(const SubmissionEntry& sqe) {
  const uint16_t qid = qid_of(sqe.cdw10);
  const uint32_t entries = entries_of(sqe.cdw10);
  const bool pc = sqe.cdw11 & 1;
  const uint16_t cqid = static_cast<uint16_t>(sqe.cdw11 >> 16);
  uint32_t iosqes;
  {
    std::lock_guard lock(mu_);
    iosqes = (cc_ >> kCcIosqesShift) & 0xF;
  }
  if (shut_down_) return kCommandSequenceError;  // as Create I/O CQ
  if (qid == 0 || qid > features_.sq_allocated || sqs_[qid]) return kInvalidQueueIdentifier;
  if (entries < 2 || entries > kMaxQueueEntries) return kInvalidQueueSize;
  if (!pc) return kInvalidField;
  if (cqid == 0 || cqid > kMaxIoQueues || !cqs_[cqid].worker) return kCompletionQueueInvalid;
  if (iosqes != kSqEntryShift) return kInvalidField;
  if (!ring_in_ram(mem_, sqe.prp1, entries, kSqEntryShift, limits_.page_size)) return kInvalidField;
  return start_sq(SqConfig{.qid = qid, .gpa = sqe.prp1, .entries = entries, .cqid = cqid});
}

Status NvmeController::start_sq(const SqConfig& sq) {
  auto fd = make_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  NvmeIoWorker* w = cqs_[sq.cqid].worker.get();
  Result<void> added =
      fd ? w->add_sq(sq, std::move(*fd)) : Result<void>(tl::unexpected(fd.error()));
  if (!added) {
    TERN_LOG_RATELIMITED(log_limit_, warn, "{}: Create I/O SQ {}: {}", name(), sq.qid,
                         added.error().message());
    return kInternalError;
  }
  sqs_[sq.qid] = sq;
  cqs_[sq.cqid].sqids.push_back(sq.qid);
  const BorrowedFd doorbell = w->sq_doorbell_fd(sq.qid);
  {
    std::unique_lock lock(dispatch_mu_);
    dispatch_.sq[sq.qid] = w;
  }
  std::lock_guard lock(mu_);
  if (shadow_.enabled()) set_sq_ioeventfd_locked(sq.qid, doorbell, true);
  return kSuccess;
}

Status NvmeController::admin_delete_sq(const SubmissionEntry& sqe) {
  const uint16_t qid = qid_of(sqe.cdw10);
  if (qid == 0 || qid > kMaxIoQueues || !sqs_[qid]) return kInvalidQueueIdentifier;
  const uint16_t cqid = sqs_[qid]->cqid;
  {
    std::unique_lock lock(dispatch_mu_);
    dispatch_.sq[qid] = nullptr;
  }
  {
    std::lock_guard lock(mu_);
    set_sq_ioeventfd_locked(qid, BorrowedFd(-1), false);
  }
  // §5.6: commands in flight complete (their completions posted), unfetched ones are dropped.
  cqs_[cqid].worker->remove_sq(qid);
  std::erase(cqs_[cqid].sqids, qid);
  sqs_[qid].reset();
  return kSuccess;
}

Status NvmeController::admin_delete_cq(const SubmissionEntry& sqe) {
  const uint16_t qid = qid_of(sqe.cdw10);
  if (qid == 0 || qid > kMaxIoQueues || !cqs_[qid].worker) return kInvalidQueueIdentifier;
  if (!cqs_[qid].sqids.empty()) return kInvalidQueueDeletion;
  publish_cq(qid, nullptr, nullptr);
  cqs_[qid].worker.reset();
  return kSuccess;
}

Status NvmeController::admin_doorbell_buffer_config(const SubmissionEntry& sqe) {
  const uint64_t page = limits_.page_size;
  auto page_ok = [&](uint64_t gpa) {
    return gpa != 0 && gpa % page == 0 && mem_.slice(gpa, page).has_value();
  };
  if (!page_ok(sqe.prp1) || !page_ok(sqe.prp2) || sqe.prp1 == sqe.prp2) return kInvalidField;
  const ShadowDoorbells shadow{.shadow_gpa = sqe.prp1, .eventidx_gpa = sqe.prp2};
  // The workers switch to the shadow page first, then KVM takes the tail doorbells over
  // (§5.8; the admin queue keeps its MMIO doorbells, as Linux expects).
  std::vector<std::pair<uint16_t, BorrowedFd>> fds;
  for (IoCq& cq : cqs_) {
    if (!cq.worker) continue;
    cq.worker->set_shadow(shadow);
    for (uint16_t sq : cq.sqids) fds.emplace_back(sq, cq.worker->sq_doorbell_fd(sq));
  }
  std::lock_guard lock(mu_);
  shadow_ = shadow;
  for (auto& [qid, fd] : fds) set_sq_ioeventfd_locked(qid, fd, true);
  shadow_enabled_.store(1, std::memory_order_relaxed);
  return kSuccess;
}

}  // namespace tern::nvme
