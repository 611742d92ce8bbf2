// NvmeDisk, and the NvmeController's PCI side: construction, config space, BAR dispatch,
// interrupts (MSI-X, or INTx with INTMS/INTMC), asynchronous events, counters.
#include "nvme/nvme_controller.h"

#include <cstring>

#include "devices/pci/pci_registers.h"
#include "nvme/nvme_controller_impl.h"

namespace tern::nvme {

namespace {

/// FNV-1a, 64 bits.
uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

ControllerInfo make_info(const NvmeDisk& d) {
  ControllerInfo c;
  c.serial = d.config().serial.empty() ? "tern-" + std::string(d.name()) : d.config().serial;
  c.max_queue_entries = static_cast<uint16_t>(kMaxQueueEntries);
  c.io_queues = kMaxIoQueues;
  c.volatile_write_cache = d.config().cache != CacheMode::kDirectSync;
  c.ns.lba_shift = d.disk().logical_block_size() == 4096 ? 12 : 9;
  c.ns.size_lbas = d.disk().size_bytes() >> c.ns.lba_shift;
  c.ns.read_only = d.disk().read_only();
  c.ns.discard = true;
  // NGUID: stable per image (the serial when given, else the path), never all zeros.
  const std::string key = d.config().serial.empty() ? d.disk().path() : d.config().serial;
  uint64_t a = fnv1a(key) | 1, b = fnv1a(key, a);
  std::memcpy(c.nguid.data(), &a, 8);
  std::memcpy(c.nguid.data() + 8, &b, 8);
  return c;
}

}  // namespace

// ---- NvmeDisk ----

Result<std::shared_ptr<NvmeDisk>> NvmeDisk::create(const DiskConfig& config, std::string name) {
  if (!config.vhost_user_socket.empty())
    return fail("--disk interface=nvme", "not with vhost-user=");
  TRY(validate_disk_config(config));
  ASSIGN_OR_RETURN(DiskImage image, DiskImage::open(config));
  // A namespace of 0 blocks: Linux probes the controller and then shows no /dev/nvme0n1.
  if (image.size_bytes() < 512)
    return fail("--disk path=" + config.path,
                "image is " + std::to_string(image.size_bytes()) +
                    " bytes: an NVMe namespace needs at least one 512-byte block");
  return std::shared_ptr<NvmeDisk>(new NvmeDisk(config, std::move(image), std::move(name)));
}

Result<std::shared_ptr<PciFunction>> NvmeDisk::make_function(const PciFunctionServices& services) {
  if (!made_.expired()) return fail(name_, "make_function: the controller was already built");
  if (!services.memory || !services.platform)
    return fail(name_, "make_function: guest memory and a PCI platform are required");
  ASSIGN_OR_RETURN(auto c, NvmeController::create(shared_from_this(), services));
  std::shared_ptr<PciFunction> fn = std::move(c);
  made_ = fn;
  return fn;
}

// ---- construction ----

Result<std::shared_ptr<NvmeController>> NvmeController::create(
    std::shared_ptr<NvmeDisk> disk, const PciFunctionServices& services) {
  PciIdentity id{.vendor_id = kPciVendorRedHat,
                 .device_id = kPciDeviceNvme,
                 .subsystem_vendor_id = kPciVendorRedHat,
                 .subsystem_id = 0x1100,
                 .revision = 2,
                 .class_code = kPciClassNvme,
                 .interrupt_pin = 1,  // INTA#; reads 0 if placed with INTx not wired
                 .interrupt_line = 0xFF};
  auto c = std::shared_ptr<NvmeController>(new NvmeController(std::move(disk), services, id));
  ASSIGN_OR_RETURN(c->msix_, MsixTable::create(kMsixVectors, c->platform_));
  c->config_.declare_bar(PciBarDecl{.index = 0, .size = kBar0Bytes, .is_64bit = true});
  c->msix_cap_ = MsixCapability::add(c->config_, MsixLayout{.vectors = kMsixVectors,
                                                            .table_bar = 0,
                                                            .table_offset = kMsixTableOffset,
                                                            .pba_bar = 0,
                                                            .pba_offset = kMsixPbaOffset});
  c->admin_thread_ = std::thread([raw = c.get()] { raw->admin_loop(); });
  return c;
}

NvmeController::NvmeController(std::shared_ptr<NvmeDisk> disk, const PciFunctionServices& services,
                               PciIdentity id)
    : disk_(std::move(disk)),
      mem_(*services.memory),
      platform_(*services.platform),
      info_(make_info(*disk_)),
      config_(id),
      queue_counters_(new QueueCounters[kMaxIoQueues + 1]) {}

NvmeController::~NvmeController() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    park_ = false;
  }
  admin_cv_.notify_all();
  if (admin_thread_.joinable()) admin_thread_.join();
  stop_all_queues();
}

std::vector<PciBarDecl> NvmeController::bars() const {
  std::lock_guard lock(mu_);
  return config_.bar_declarations();
}

Result<void> NvmeController::place(const PciPlacement& placement) {
  std::lock_guard lock(mu_);
  config_.apply_placement(placement);
  intx_irq_ = placement.intx_irq;
  move_ioeventfds_locked();
  return {};
}

// ---- configuration space ----

void NvmeController::config_read(uint32_t offset, std::span<uint8_t> data) {
  std::lock_guard lock(mu_);
  config_.read(offset, data);
}

void NvmeController::config_write(uint32_t offset, std::span<const uint8_t> data) {
  std::lock_guard lock(mu_);
  config_.write(offset, data);
  msix_cap_.sync(config_, *msix_);
  intx_update_locked();  // INTx Disable or MSI-X Enable may have changed
  move_ioeventfds_locked();
}

std::vector<PciBarWindow> NvmeController::memory_windows() const {
  std::lock_guard lock(mu_);
  return config_.memory_windows();
}

// ---- BAR0 ----

void NvmeController::bar_read(uint8_t bar, uint64_t offset, std::span<uint8_t> data) {
  std::memset(data.data(), 0, data.size());
  if (bar != 0) return;
  if (msix_cap_.bar_read(*msix_, bar, offset, data)) return;
  if (offset < kRegDoorbells) {
    std::lock_guard lock(mu_);
    reg_read_locked(offset, data);
  }  // doorbells and everything else read 0 (§3.1.24: doorbells are write-only)
}

void NvmeController::bar_write(uint8_t bar, uint64_t offset, std::span<const uint8_t> data) {
  if (bar != 0) return;
  if (msix_cap_.bar_write(*msix_, bar, offset, data)) return;
  if (offset >= kRegDoorbells && offset < kMsixTableOffset) return doorbell_write(offset, data);
  uint64_t v = 0;
  std::memcpy(&v, data.data(), std::min<size_t>(data.size(), 8));
  if (offset >= kRegDoorbells) return protocol_error("write outside the registers", offset, v);
  std::lock_guard lock(mu_);
  reg_write_locked(offset, static_cast<uint32_t>(data.size()), v);
}

void NvmeController::protocol_error(const char* what, uint64_t offset, uint64_t value) {
  ignored_register_writes_.fetch_add(1, std::memory_order_relaxed);
  TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {} (offset {:#x}, value {:#x}): ignored", name(),
                       what, offset, value);
}

// ---- interrupts ----

namespace {
/// INTMS/INTMC and intx_pending_ bit of MSI-X vector `vector` (vectors ≥ 31 share bit 31).
uint32_t intx_bit(uint16_t vector) {
  return 1u << std::min<uint16_t>(vector, 31);
}
}  // namespace

void NvmeController::signal(uint16_t cqid, uint16_t vector) {
  switch (msix_->fire_if_enabled(vector)) {
    case MsixTable::Fired::kSent:
      interrupts_sent_.fetch_add(1, std::memory_order_relaxed);
      return;
    case MsixTable::Fired::kPending:
    case MsixTable::Fired::kNoVector:
      return;
    case MsixTable::Fired::kDisabled:
      break;
  }
  std::lock_guard lock(mu_);
  (void)cqid;
  intx_pending_ |= intx_bit(vector);
  // The host may have consumed these entries already (its handlers poll every CQ on the shared
  // line): a line raised for nothing would stay up with no handler claiming it.
  intx_recheck_locked(intx_bit(vector));
}

bool NvmeController::level_triggered() const {
  return !msix_->enabled();
}

void NvmeController::shadow_cq_head(uint16_t cqid, uint32_t head, bool head_phase) {
  std::lock_guard lock(mu_);
  IntxCq& c = intx_cq_[cqid];
  if (!c.exists || head >= c.entries) return;
  // The worker's phase is the truth (it posts the entries); the shadow page may hold a newer
  // head, which intx_cq_head_locked() reads and tracks from here.
  c.head = head;
  c.head_phase = head_phase;
  intx_cq_head_locked(cqid, head);
}

void NvmeController::intx_update_locked() {
  bool level = intx_irq_ != 0xFF && !msix_->enabled() &&
               !(config_.command() & pci::kCommandIntxDisable) && (intx_pending_ & ~intms_) != 0;
  if (level == intx_line_) return;
  intx_line_ = level;
  if (level) interrupts_sent_.fetch_add(1, std::memory_order_relaxed);
  platform_.set_irq_level(intx_irq_, level);
}

void NvmeController::intx_track_head_locked(uint16_t cqid, uint32_t head) {
  IntxCq& c = intx_cq_[cqid];
  // With shadow doorbells (I/O queues) the host writes its head to the shadow page first and
  // rings the doorbell only when EventIdx asks: the page holds the latest head.
  if (cqid != 0 && shadow_.enabled()) {
    auto v = shadow_.read_shadow(mem_, cqid, true);
    if (v && *v < c.entries) head = *v;
  }
  if (!c.exists || head >= c.entries || head == c.head) return;
  if (head < c.head) c.head_phase = !c.head_phase;  // the host's head wrapped
  c.head = head;
}

void NvmeController::intx_recheck_locked(uint32_t bit) {
  // The line stays up while any CQ sharing the vector's bit (and signalling: IEN 1) holds an
  // entry the host has not consumed (its phase tag is the one expected at the host's head).
  bool any = false;
  for (uint16_t q = 0; q < intx_cq_.size(); ++q) {
    IntxCq& c = intx_cq_[q];
    if (!c.exists || !c.ien || intx_bit(c.vector) != bit) continue;
    intx_track_head_locked(q, c.head);
    auto st = mem_.read_obj<uint16_t>(c.gpa + (uint64_t{c.head} << kCqEntryShift) +
                                      offsetof(CompletionEntry, status));
    if (st && ((*st & 1) != 0) == c.head_phase) any = true;
  }
  if (!any) intx_pending_ &= ~bit;
  intx_update_locked();
}

void NvmeController::intx_cq_head_locked(uint16_t cqid, uint32_t head) {
  IntxCq& c = intx_cq_[cqid];
  if (!c.exists) return;
  intx_track_head_locked(cqid, head);
  if (msix_->enabled() || intx_pending_ == 0) return;
  intx_recheck_locked(intx_bit(c.vector));
}

void NvmeController::post_async_event(uint32_t dw0) {
  {
    std::lock_guard lock(mu_);
    const uint8_t type = dw0 & 7;
    bool dup = false;
    for (uint32_t e : events_) dup |= e == dw0;
    if ((masked_event_types_ & (1u << type)) || dup || events_.size() >= 16 || !admin_enabled_) {
      async_events_dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    events_.push_back(dw0);
  }
  admin_cv_.notify_all();
}

// ---- counters ----

DeviceCounters NvmeController::counters() const {
  DeviceCounters d;
  d.name = std::string(name());
  d.kind = "nvme";
  uint64_t invalid_doorbells = invalid_doorbells_.load(std::memory_order_relaxed);
  for (uint16_t q = 0; q <= kMaxIoQueues; ++q) {
    const QueueCounters& c = queue_counters_[q];
    invalid_doorbells += c.invalid_doorbells.load(std::memory_order_relaxed);
    if (q == 0 || c.commands.load(std::memory_order_relaxed) ||
        c.doorbell_writes.load(std::memory_order_relaxed))
      d.queues.push_back(c.snapshot(q));
  }
  auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  const IoCommandCounters& io = io_counters_;
  d.counters = {{"admin_commands", ld(admin_commands_)},
                {"reads", ld(io.reads)},
                {"writes", ld(io.writes)},
                {"flushes", ld(io.flushes)},
                {"write_zeroes", ld(io.write_zeroes)},
                {"deallocates", ld(io.deallocates)},
                {"read_bytes", ld(io.read_bytes)},
                {"written_bytes", ld(io.written_bytes)},
                {"invalid_commands", ld(io.invalid_commands)},
                {"io_errors", ld(io.io_errors)},
                {"invalid_doorbells", invalid_doorbells},
                {"controller_resets", ld(controller_resets_)},
                {"controller_fatal", ld(controller_fatal_)},
                {"interrupts_sent", ld(interrupts_sent_)},
                {"shadow_doorbell_enabled", ld(shadow_enabled_)},
                {"ignored_register_writes", ld(ignored_register_writes_)},
                {"async_events_dropped", ld(async_events_dropped_)},
                {"bounced", ld(executor_counters_.bounced)},
                {"bounce_waits", ld(executor_counters_.bounce_waits)}};
  disk_->disk().append_counters(d.counters);
  return d;
}

}  // namespace tern::nvme
