// NvmeController, declared in full (nvme_controller.h forward-declares it): the PCI function, its
// registers and doorbells (nvme_registers.cc), the admin thread (nvme_admin_thread.cc), the admin
// command set (nvme_admin.cc, nvme_features.cc) and snapshots (nvme_controller_state.cc).
//
// Locks, in the order they may be taken (never the other way round):
//   dispatch_mu_ (shared by doorbell writers, exclusive only to publish/unpublish queues; held
//                 while calling a worker's quick methods, which may call back into us)
//   mu_          (registers, config space, ioeventfd registry, admin doorbells, requests for the
//                 admin thread, pending asynchronous events, INTx state; never held while calling
//                 into a worker or starting/stopping threads)
// The MsixTable locks itself (taken inside mu_ or with no lock). Admin-thread state (rings of
// queue 0, features, the workers, outstanding AERs) is touched only by the admin thread, or by
// quiesce()/save_state()/restore_state() while the admin thread is parked.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "devices/pci/msix_capability.h"
#include "devices/pci/msix_table.h"
#include "devices/pci/pci_config_space.h"
#include "nvme/nvme_controller.h"
#include "nvme/nvme_identify.h"
#include "nvme/nvme_io_worker.h"
#include "nvme/nvme_queue.h"

namespace tern::nvme {

/// Feature values as Set Features stored them (§5.21.1). Reset to these defaults by a controller
/// reset.
struct FeatureValues {
  uint32_t arbitration = 0;
  uint32_t power_management = 0;
  uint16_t temp_over = 0x0157;  ///< Over Temperature Threshold, kelvin (70 °C).
  uint16_t temp_under = 0;
  uint32_t error_recovery = 0;
  bool volatile_write_cache = true;      ///< WCE; only when Identify VWC is 1.
  uint16_t sq_allocated = kMaxIoQueues;  ///< Number of Queues granted (not 0's based).
  uint16_t cq_allocated = kMaxIoQueues;
  bool queues_set = false;  ///< Number of Queues was set since the last reset.
  uint32_t interrupt_coalescing = 0;
  uint32_t write_atomicity = 0;
  uint32_t async_event_config = 0;
  std::array<uint32_t, kMsixVectors> vector_config{};  ///< CD bit per vector (IV implied).
};

/// See the file comment and nvme_controller.h.
class NvmeController final : public PciFunction, private InterruptSink {
 public:
  /// Builds the function (config space, BAR0, MSI-X table) and starts the admin thread. Not
  /// placed yet. Errors: eventfds / MSI GSIs.
  [[nodiscard]] static Result<std::shared_ptr<NvmeController>> create(
      std::shared_ptr<NvmeDisk> disk, const PciFunctionServices& services);
  /// Stops the admin thread and every worker (in-flight commands completed), removes the
  /// ioeventfds.
  ~NvmeController() override;

  // PciFunction / PciDevice.
  std::string_view kind() const override { return "nvme"; }
  std::string_view name() const override { return disk_->name(); }
  std::vector<PciBarDecl> bars() const override;
  [[nodiscard]] Result<void> place(const PciPlacement& placement) override;
  void config_read(uint32_t offset, std::span<uint8_t> data) override;
  void config_write(uint32_t offset, std::span<const uint8_t> data) override;
  std::vector<PciBarWindow> memory_windows() const override;
  void bar_read(uint8_t bar, uint64_t offset, std::span<uint8_t> data) override;
  void bar_write(uint8_t bar, uint64_t offset, std::span<const uint8_t> data) override;
  void quiesce() override;
  void unquiesce() override;
  void save_state(snap::ByteWriter& w) const override;
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r) override;
  DeviceCounters counters() const override;

  /// For tests: the MSI-X table and the controller info (Identify's source).
  [[nodiscard]] MsixTable& msix() { return *msix_; }
  [[nodiscard]] const ControllerInfo& info() const { return info_; }

 private:
  /// One I/O CQ (its worker) and the I/O SQs that complete to it.
  struct IoCq {
    std::unique_ptr<NvmeIoWorker> worker;
    std::vector<uint16_t> sqids;
  };
  /// What doorbell writers see (under dispatch_mu_).
  struct Dispatch {
    std::array<NvmeIoWorker*, kMaxIoQueues + 1> sq{};  ///< Owning worker by SQ id.
    std::array<NvmeIoWorker*, kMaxIoQueues + 1> cq{};  ///< Worker by CQ id.
  };
  /// Per-CQ host head tracking for INTx (mu_): the line drops when the CQ holds no new entry.
  struct IntxCq {
    bool exists = false;
    uint64_t gpa = 0;
    uint32_t entries = 0;
    uint16_t vector = 0;
    bool ien = true;  ///< Interrupts Enabled (a polled CQ never holds the line up).
    uint32_t head = 0;
    bool head_phase = true;  ///< Phase tag a new entry at `head` carries.
  };
  /// A CC transition the admin thread has yet to act on.
  enum Request : uint32_t { kReqEnable = 1, kReqDisable = 2, kReqShutdown = 4 };

  NvmeController(std::shared_ptr<NvmeDisk> disk, const PciFunctionServices& services,
                 PciIdentity id);

  // ---- registers (nvme_registers.cc) ----
  void reg_read_locked(uint64_t offset, std::span<uint8_t> data);
  void reg_write_locked(uint64_t offset, uint32_t width, uint64_t value);
  void write_cc_locked(uint32_t value);
  void doorbell_write(uint64_t offset, std::span<const uint8_t> data);
  void move_ioeventfds_locked();
  void set_sq_ioeventfd_locked(uint16_t qid, BorrowedFd fd, bool assign);
  void protocol_error(const char* what, uint64_t offset, uint64_t value);

  // ---- interrupts (nvme_controller.cc) ----
  void signal(uint16_t cqid, uint16_t vector) override;
  bool level_triggered() const override;
  void shadow_cq_head(uint16_t cqid, uint32_t head, bool head_phase) override;
  void intx_update_locked();
  /// The host moved CQ `cqid`'s head to `head` (its doorbell; with shadow doorbells the shadow
  /// page's value wins): tracked, and the INTx line dropped if nothing is left to consume.
  void intx_cq_head_locked(uint16_t cqid, uint32_t head);
  void intx_track_head_locked(uint16_t cqid, uint32_t head);
  /// Clears intx_pending_'s `bit` unless a CQ on it holds an unconsumed entry; drives the line.
  void intx_recheck_locked(uint32_t bit);
  /// An asynchronous event (any thread): queued for the admin thread.
  void post_async_event(uint32_t dw0);

  // ---- admin thread (nvme_admin_thread.cc) ----
  void admin_loop();
  void do_enable();
  void do_disable(bool count_reset);
  void do_shutdown();
  void process_admin_queue();
  void complete_admin(uint16_t cid, Status status, uint32_t dw0);
  void deliver_async_events();
  void stop_all_queues();
  [[nodiscard]] IoWorkerContext worker_context(uint16_t cqid);

  // ---- admin commands (nvme_admin.cc, nvme_features.cc) ----
  /// Executes one admin command; returns its status and DW0. `hold`: an AER kept outstanding.
  Status execute_admin(const SubmissionEntry& sqe, uint32_t& dw0, bool& hold);
  Status admin_identify(const SubmissionEntry& sqe);
  Status admin_create_cq(const SubmissionEntry& sqe);
  Status admin_create_sq(const SubmissionEntry& sqe);
  Status admin_delete_cq(const SubmissionEntry& sqe);
  Status admin_delete_sq(const SubmissionEntry& sqe);
  Status admin_set_features(const SubmissionEntry& sqe, uint32_t& dw0);
  Status admin_get_features(const SubmissionEntry& sqe, uint32_t& dw0);
  Status admin_get_log_page(const SubmissionEntry& sqe);
  Status admin_doorbell_buffer_config(const SubmissionEntry& sqe);
  [[nodiscard]] HealthCounters health() const;
  /// Adds SQ `sq` to its CQ's worker and publishes it (ioeventfd when shadow doorbells are on).
  Status start_sq(const SqConfig& sq);
  void publish_cq(uint16_t qid, NvmeIoWorker* w, const CqConfig* cq);
  [[nodiscard]] uint32_t io_queue_count() const;

  // ---- snapshots (nvme_controller_state.cc) ----
  /// Parks the admin thread (it finishes the command and CC transition at hand first).
  void park_admin();
  void unpark_admin();

  std::shared_ptr<NvmeDisk> disk_;
  const GuestMemory& mem_;
  PciPlatform& platform_;
  ControllerInfo info_;
  PrpLimits limits_;
  std::unique_ptr<MsixTable> msix_;

  // ---- under mu_ ----
  mutable std::mutex mu_;
  std::condition_variable admin_cv_;   // work for the admin thread
  std::condition_variable parked_cv_;  // the admin thread parked / idle
  PciConfigSpace config_;
  MsixCapability msix_cap_;
  uint8_t intx_irq_ = 0xFF;
  uint32_t cc_ = 0;
  uint32_t csts_ = 0;
  uint32_t aqa_ = 0;
  uint64_t asq_ = 0;
  uint64_t acq_ = 0;
  uint32_t intms_ = 0;         // INTMS/INTMC mask: bit per vector (vectors ≥ 31 share bit 31)
  uint32_t intx_pending_ = 0;  // same bits: CQs with entries the host has not consumed
  bool intx_line_ = false;
  std::array<IntxCq, kMaxIoQueues + 1> intx_cq_{};
  uint32_t requests_ = 0;                  // Request bits
  bool admin_enabled_ = false;             // admin queue live (RDY set by the admin thread)
  std::optional<uint32_t> admin_sq_tail_;  // new SQ0 tail doorbell value
  std::optional<uint32_t> admin_cq_head_;  // new CQ0 head doorbell value
  std::deque<uint32_t> events_;            // asynchronous events not yet reported (bounded)
  uint8_t masked_event_types_ = 0;         // reported, log page not read yet (§5.2)
  std::optional<uint64_t> ioeventfd_bar_;  // BAR0 address the ioeventfds are registered at
  std::map<uint16_t, int> ioeventfds_;     // SQ id -> eventfd registered (shadow doorbells on)
  bool stop_ = false;
  bool park_ = false;
  bool parked_ = false;
  uint64_t unpark_generation_ = 0;  // bumped by unpark_admin(): ends a park
  bool quiesced_ = false;
  ShadowDoorbells shadow_;  // written by the admin thread under mu_, read anywhere under mu_

  // ---- admin thread state ----
  std::optional<SubmissionRing> asq_ring_;
  std::optional<CompletionRing> acq_ring_;
  FeatureValues features_;
  /// features_.volatile_write_cache as the I/O workers read it (IoWorkerContext): stored by the
  /// admin thread before it completes the Set Features, so the writes the host sends after it
  /// see it.
  std::atomic<bool> write_cache_enabled_{true};
  std::array<IoCq, kMaxIoQueues + 1> cqs_{};
  std::array<std::optional<SqConfig>, kMaxIoQueues + 1> sqs_{};
  std::vector<uint16_t> aers_;  // CIDs of outstanding Asynchronous Event Requests
  bool shut_down_ = false;      // CSTS.SHST complete: I/O stopped until a reset

  // ---- doorbell dispatch ----
  mutable std::shared_mutex dispatch_mu_;
  Dispatch dispatch_;

  // ---- counters ----
  std::unique_ptr<QueueCounters[]> queue_counters_;
  BlockExecutorCounters executor_counters_;
  IoCommandCounters io_counters_;
  std::atomic<uint64_t> admin_commands_{0};
  std::atomic<uint64_t> invalid_doorbells_{0};
  std::atomic<uint64_t> controller_resets_{0};
  std::atomic<uint64_t> controller_fatal_{0};
  std::atomic<uint64_t> interrupts_sent_{0};
  std::atomic<uint64_t> ignored_register_writes_{0};
  std::atomic<uint64_t> shadow_enabled_{0};
  std::atomic<uint64_t> async_events_dropped_{0};
  RateLimit log_limit_{5};
  RateLimit worker_log_limit_{5};

  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  bool admin_posted_ = false;  // admin thread: CQ0 entries posted since the last interrupt
  std::thread admin_thread_;
};

}  // namespace tern::nvme
