// NvmeController snapshots: quiesce/unquiesce and the versioned save/restore of config space,
// MSI-X, registers, features, shadow doorbells, asynchronous events and every queue.
#include <algorithm>

#include "devices/device_state.h"
#include "nvme/nvme_controller_impl.h"

namespace tern::nvme {

using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr size_t kMaxEvents = 16;
constexpr size_t kMaxWorkerState = 1 << 16;
constexpr uint32_t kCcWritable = 0x00FFFFF1;
constexpr uint32_t kCstsStored = kCstsRdy | kCstsCfs | (3u << kCstsShstShift);

struct SavedCq {
  CqConfig cq;
  std::vector<SqConfig> sqs;
  std::vector<uint8_t> worker;
};
}  // namespace

void NvmeController::quiesce() {
  park_admin();
  for (IoCq& cq : cqs_)
    if (cq.worker && !shut_down_) cq.worker->pause();
  quiesced_ = true;
}

void NvmeController::unquiesce() {
  if (!quiesced_) return;
  for (IoCq& cq : cqs_)
    if (cq.worker && !shut_down_) cq.worker->resume();
  quiesced_ = false;
  unpark_admin();
}

void NvmeController::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  config_.save_state(w);
  msix_->save_state(w);
  w.u32(cc_);
  w.u32(csts_);
  w.u32(aqa_);
  w.u64(asq_);
  w.u64(acq_);
  w.u32(intms_);
  w.u32(intx_pending_);
  w.boolean(intx_line_);
  w.boolean(admin_enabled_);
  w.boolean(shut_down_);
  if (admin_enabled_) {
    asq_ring_->save(w);
    acq_ring_->save(w);
  }
  for (const IntxCq& c : intx_cq_) {
    w.u32(c.head);
    w.boolean(c.head_phase);
  }
  const FeatureValues& f = features_;
  // WCE as Get Features reports it: the default (1) means 0 when Identify VWC is 0 (directsync),
  // and restore_state refuses a 1 there.
  const bool wce = f.volatile_write_cache && info_.volatile_write_cache;
  for (uint32_t v : {f.arbitration, f.power_management, uint32_t{f.temp_over},
                     uint32_t{f.temp_under}, f.error_recovery, uint32_t{wce},
                     uint32_t{f.sq_allocated}, uint32_t{f.cq_allocated}, uint32_t{f.queues_set},
                     f.interrupt_coalescing, f.write_atomicity, f.async_event_config})
    w.u32(v);
  for (uint32_t v : f.vector_config) w.u32(v);
  w.u64(shadow_.shadow_gpa);
  w.u64(shadow_.eventidx_gpa);
  w.u8(static_cast<uint8_t>(events_.size()));
  for (uint32_t e : events_) w.u32(e);
  w.u8(masked_event_types_);
  w.u8(static_cast<uint8_t>(aers_.size()));
  for (uint16_t cid : aers_) w.u16(cid);
  uint8_t ncq = 0;
  for (const IoCq& cq : cqs_) ncq += cq.worker != nullptr;
  w.u8(ncq);
  for (const IoCq& cq : cqs_) {
    if (!cq.worker) continue;
    const CqConfig& c = cq.worker->cq();
    w.u16(c.qid);
    w.u64(c.gpa);
    w.u32(c.entries);
    w.u16(c.vector);
    w.boolean(c.interrupts_enabled);
    std::vector<SqConfig> sqs = cq.worker->sqs();
    w.u8(static_cast<uint8_t>(sqs.size()));
    for (const SqConfig& s : sqs) {
      w.u16(s.qid);
      w.u64(s.gpa);
      w.u32(s.entries);
    }
    snap::ByteWriter sub;
    cq.worker->save(sub);
    w.blob(sub.data());
  }
}

Result<void> NvmeController::restore_state(snap::ByteReader& r) {
  const std::string dev(name());
  park_admin();
  struct Unpark {
    NvmeController* c;
    ~Unpark() { c->unpark_admin(); }
  } unpark{this};
  std::unique_lock lock(mu_);
  if (cc_ != 0 || admin_enabled_ || io_queue_count() != 0)
    return fail("restore " + dev, "the controller was already used (restore needs a fresh one)");
  TRY(devstate::expect_version(r, dev, kVersion));
  PciConfigSpace cfg = config_;
  TRY(cfg.restore_state(r, dev));
  TRY(msix_->restore_state(r, dev));
  ASSIGN_OR_RETURN(uint32_t cc, named(dev, "CC", r.u32()));
  ASSIGN_OR_RETURN(uint32_t csts, named(dev, "CSTS", r.u32()));
  ASSIGN_OR_RETURN(uint32_t aqa, named(dev, "AQA", r.u32()));
  ASSIGN_OR_RETURN(uint64_t asq, named(dev, "ASQ", r.u64()));
  ASSIGN_OR_RETURN(uint64_t acq, named(dev, "ACQ", r.u64()));
  ASSIGN_OR_RETURN(uint32_t intms, named(dev, "INTMS", r.u32()));
  ASSIGN_OR_RETURN(uint32_t intx_pending, named(dev, "INTx pending", r.u32()));
  ASSIGN_OR_RETURN(bool intx_line, named(dev, "INTx level", r.boolean()));
  ASSIGN_OR_RETURN(bool enabled, named(dev, "admin queue enabled", r.boolean()));
  ASSIGN_OR_RETURN(bool shut_down, named(dev, "shut down", r.boolean()));
  if (cc & ~kCcWritable) return bad_field(dev, "CC", "reserved bits set");
  if (csts & ~kCstsStored || ((csts >> kCstsShstShift) & 3) == 3)
    return bad_field(dev, "CSTS", "reserved bits or Shutdown Status 11b");
  if (aqa & ~(kAqaAsqsMask | (kAqaAsqsMask << kAqaAcqsShift)))
    return bad_field(dev, "AQA", "reserved bits set");
  if (enabled != ((csts & kCstsRdy) != 0) || (enabled && !(cc & kCcEn)))
    return bad_field(dev, "CSTS.RDY", "does not match CC.EN and the admin queue");
  // The admin thread parked idle: a shutdown it saw is complete (SHST 10b, I/O paused until a
  // reset; also after an enable refused with CFS); one still "occurring" or a pause without SHST
  // complete would never end.
  const uint32_t shst = (csts >> kCstsShstShift) & 3;
  if (shst == kShstOccurring || shut_down != (shst == kShstComplete))
    return bad_field(dev, "shut down", "does not match CSTS.SHST");
  const uint32_t asq_entries = (aqa & kAqaAsqsMask) + 1;
  const uint32_t acq_entries = ((aqa >> kAqaAcqsShift) & kAqaAsqsMask) + 1;
  std::optional<SubmissionRing> asq_ring;
  std::optional<CompletionRing> acq_ring;
  if (enabled) {
    if (asq_entries < 2 || !ring_in_ram(mem_, asq, asq_entries, kSqEntryShift, limits_.page_size))
      return bad_field(dev, "ASQ", "not page aligned guest RAM of AQA's size");
    if (acq_entries < 2 || !ring_in_ram(mem_, acq, acq_entries, kCqEntryShift, limits_.page_size))
      return bad_field(dev, "ACQ", "not page aligned guest RAM of AQA's size");
    asq_ring.emplace(mem_, SqConfig{.qid = 0, .gpa = asq, .entries = asq_entries, .cqid = 0});
    acq_ring.emplace(mem_, CqConfig{.qid = 0, .gpa = acq, .entries = acq_entries, .vector = 0});
    TRY(named(dev, "admin SQ", asq_ring->restore(r)));
    TRY(named(dev, "admin CQ", acq_ring->restore(r)));
  }
  std::array<IntxCq, kMaxIoQueues + 1> intx{};
  for (size_t q = 0; q < intx.size(); ++q) {
    ASSIGN_OR_RETURN(intx[q].head, named(dev, "INTx CQ head", r.u32()));
    ASSIGN_OR_RETURN(intx[q].head_phase, named(dev, "INTx CQ phase", r.boolean()));
  }
  FeatureValues f;
  std::array<uint32_t, 12> fv;
  for (uint32_t& v : fv) {
    ASSIGN_OR_RETURN(v, named(dev, "features", r.u32()));
  }
  f.arbitration = fv[0];
  f.power_management = fv[1];
  f.temp_over = static_cast<uint16_t>(fv[2]);
  f.temp_under = static_cast<uint16_t>(fv[3]);
  f.error_recovery = fv[4];
  f.volatile_write_cache = fv[5] != 0;
  f.sq_allocated = static_cast<uint16_t>(fv[6]);
  f.cq_allocated = static_cast<uint16_t>(fv[7]);
  f.queues_set = fv[8] != 0;
  f.interrupt_coalescing = fv[9];
  f.write_atomicity = fv[10];
  f.async_event_config = fv[11];
  if (fv[2] > 0xFFFF || fv[3] > 0xFFFF || fv[5] > 1 || fv[8] > 1 || (fv[1] & 0x1F) != 0 ||
      (fv[5] && !info_.volatile_write_cache))
    return bad_field(dev, "features", "a value Set Features would refuse");
  if (f.sq_allocated < 1 || f.sq_allocated > kMaxIoQueues || f.cq_allocated < 1 ||
      f.cq_allocated > kMaxIoQueues)
    return bad_field(dev, "Number of Queues", "outside 1.." + std::to_string(kMaxIoQueues));
  for (uint32_t& v : f.vector_config) {
    ASSIGN_OR_RETURN(v, named(dev, "Interrupt Vector Configuration", r.u32()));
    if (v != 0 && v != (1u << 16)) return bad_field(dev, "Interrupt Vector Configuration", "bits");
  }
  ShadowDoorbells shadow;
  ASSIGN_OR_RETURN(shadow.shadow_gpa, named(dev, "shadow doorbell page", r.u64()));
  ASSIGN_OR_RETURN(shadow.eventidx_gpa, named(dev, "EventIdx page", r.u64()));
  auto page_ok = [&](uint64_t gpa) {
    return gpa % limits_.page_size == 0 && mem_.slice(gpa, limits_.page_size).has_value();
  };
  if (shadow.enabled() &&
      (!enabled || !page_ok(shadow.shadow_gpa) || !page_ok(shadow.eventidx_gpa)))
    return bad_field(dev, "shadow doorbells", "pages not page aligned RAM, or admin queue off");
  if (!shadow.enabled() && shadow.eventidx_gpa != 0)
    return bad_field(dev, "shadow doorbells", "EventIdx page without a shadow page");
  ASSIGN_OR_RETURN(uint8_t nev, named(dev, "asynchronous events", r.u8()));
  if (nev > kMaxEvents) return bad_field(dev, "asynchronous events", "more than 16");
  std::deque<uint32_t> events;
  for (uint8_t i = 0; i < nev; ++i) {
    ASSIGN_OR_RETURN(uint32_t e, named(dev, "asynchronous event", r.u32()));
    events.push_back(e);
  }
  ASSIGN_OR_RETURN(uint8_t masked, named(dev, "masked event types", r.u8()));
  ASSIGN_OR_RETURN(uint8_t naer, named(dev, "outstanding AERs", r.u8()));
  if (naer > kAerLimit || (naer && !enabled))
    return bad_field(dev, "outstanding AERs", std::to_string(naer) + " (limit 4, admin queue on)");
  std::vector<uint16_t> aers;
  for (uint8_t i = 0; i < naer; ++i) {
    ASSIGN_OR_RETURN(uint16_t cid, named(dev, "AER command identifier", r.u16()));
    aers.push_back(cid);
  }
  ASSIGN_OR_RETURN(uint8_t ncq, named(dev, "I/O CQ count", r.u8()));
  if (ncq > kMaxIoQueues || (ncq && !enabled))
    return bad_field(dev, "I/O CQ count", std::to_string(ncq) + " (admin queue on, ≤ 64)");
  std::vector<SavedCq> saved(ncq);
  std::array<bool, kMaxIoQueues + 1> cq_seen{}, sq_seen{};
  for (SavedCq& s : saved) {
    CqConfig& c = s.cq;
    ASSIGN_OR_RETURN(c.qid, named(dev, "CQ id", r.u16()));
    ASSIGN_OR_RETURN(c.gpa, named(dev, "CQ base", r.u64()));
    ASSIGN_OR_RETURN(c.entries, named(dev, "CQ size", r.u32()));
    ASSIGN_OR_RETURN(c.vector, named(dev, "CQ interrupt vector", r.u16()));
    ASSIGN_OR_RETURN(c.interrupts_enabled, named(dev, "CQ IEN", r.boolean()));
    const std::string fq = "CQ " + std::to_string(c.qid);
    if (c.qid == 0 || c.qid > f.cq_allocated || cq_seen[c.qid])
      return bad_field(dev, fq, "id 0, above Number of Queues, or twice");
    cq_seen[c.qid] = true;
    if (c.entries < 2 || c.entries > kMaxQueueEntries)
      return bad_field(dev, fq + " size", std::to_string(c.entries));
    if (c.vector >= kMsixVectors) return bad_field(dev, fq + " vector", std::to_string(c.vector));
    if (!ring_in_ram(mem_, c.gpa, c.entries, kCqEntryShift, limits_.page_size))
      return bad_field(dev, fq + " base", "not page aligned guest RAM");
    ASSIGN_OR_RETURN(uint8_t nsq, named(dev, fq + " SQ count", r.u8()));
    for (uint8_t i = 0; i < nsq; ++i) {
      SqConfig sq{.cqid = c.qid};
      ASSIGN_OR_RETURN(sq.qid, named(dev, "SQ id", r.u16()));
      ASSIGN_OR_RETURN(sq.gpa, named(dev, "SQ base", r.u64()));
      ASSIGN_OR_RETURN(sq.entries, named(dev, "SQ size", r.u32()));
      const std::string fs = "SQ " + std::to_string(sq.qid);
      if (sq.qid == 0 || sq.qid > f.sq_allocated || sq_seen[sq.qid])
        return bad_field(dev, fs, "id 0, above Number of Queues, or twice");
      sq_seen[sq.qid] = true;
      if (sq.entries < 2 || sq.entries > kMaxQueueEntries)
        return bad_field(dev, fs + " size", std::to_string(sq.entries));
      if (!ring_in_ram(mem_, sq.gpa, sq.entries, kSqEntryShift, limits_.page_size))
        return bad_field(dev, fs + " base", "not page aligned guest RAM");
      s.sqs.push_back(sq);
    }
    std::sort(s.sqs.begin(), s.sqs.end(), [](auto& a, auto& b) { return a.qid < b.qid; });
    ASSIGN_OR_RETURN(s.worker, named(dev, fq + " rings", r.blob(kMaxWorkerState)));
  }
  TRY(named(dev, "end", r.expect_end()));

  // Apply. The registers first (the workers' interrupts need the MSI-X state).
  config_ = cfg;
  msix_cap_.sync(config_, *msix_);
  cc_ = cc;
  csts_ = csts;
  aqa_ = aqa;
  asq_ = asq;
  acq_ = acq;
  intms_ = intms;
  intx_pending_ = intx_pending;
  intx_line_ = intx_line;  // adopted, not driven: the irqchip's restored state holds the level
  admin_enabled_ = enabled;
  events_ = std::move(events);
  masked_event_types_ = masked;
  shadow_ = shadow;
  shadow_enabled_.store(shadow.enabled(), std::memory_order_relaxed);
  move_ioeventfds_locked();
  if (enabled) intx_cq_[0] = IntxCq{.exists = true, .gpa = acq, .entries = acq_entries};
  intx_cq_[0].head = intx[0].head % std::max<uint32_t>(acq_entries, 1);
  intx_cq_[0].head_phase = intx[0].head_phase;
  lock.unlock();
  asq_ring_ = std::move(asq_ring);
  acq_ring_ = std::move(acq_ring);
  features_ = f;
  write_cache_enabled_.store(f.volatile_write_cache, std::memory_order_release);
  aers_ = std::move(aers);
  shut_down_ = shut_down;
  for (SavedCq& s : saved) {
    const uint16_t q = s.cq.qid;
    ASSIGN_OR_RETURN(auto w, NvmeIoWorker::create(worker_context(q), s.cq, ShadowDoorbells{}));
    w->pause();
    cqs_[q].worker = std::move(w);
    NvmeIoWorker* worker = cqs_[q].worker.get();
    for (const SqConfig& sq : s.sqs) {
      if (start_sq(sq) != kSuccess)
        return fail("restore " + dev, "SQ " + std::to_string(sq.qid) + ": could not start");
    }
    snap::ByteReader sub(s.worker, "restore " + dev + " CQ " + std::to_string(q) + " rings");
    TRY(worker->restore(sub));
    TRY(sub.expect_end());
    // The CQ head the host last rang, as the controller recorded it: newer than the worker's in
    // a snapshot whose save() did not take the MMIO doorbells yet. With shadow doorbells the
    // shadow page (guest RAM) has the host's head.
    if (!shadow.enabled()) worker->restore_cq_head(intx[q].head % s.cq.entries);
    if (shadow.enabled()) worker->set_shadow(shadow);
    publish_cq(q, worker, &s.cq);
    {
      std::lock_guard l(mu_);
      intx_cq_[q].head = intx[q].head % s.cq.entries;
      intx_cq_[q].head_phase = intx[q].head_phase;
    }
    if (!shut_down_) worker->resume();
  }
  std::lock_guard l(mu_);
  if (asq_ring_ && asq_ring_->pending() > 0) admin_sq_tail_ = asq_ring_->tail();  // resume work
  return {};
}

}  // namespace tern::nvme
