// The emulated NVMe controller (NVMe base spec 1.4; PCI class 01:08:02): one namespace (the disk
// image), an admin queue served by the controller's admin thread, up to 64 I/O queue pairs served
// by NvmeIoWorkers, MSI-X with one vector per completion queue (INTx when MSI-X is off), shadow
// doorbells (Doorbell Buffer Config) with the SQ tail doorbells as ioeventfds.
//
// BAR0 (16 KiB, 64-bit, non-prefetchable): the registers (CAP, VS, INTMS, INTMC, CC, CSTS, AQA,
// ASQ, ACQ) at 0, the doorbells at 0x1000 (stride 4: 65 queues × 2 × 4 bytes), the MSI-X table
// at 0x2000 and its PBA at 0x3000 (65 vectors).
//
// Threads: bar_read/bar_write on vCPU threads (registers under the controller's mutex; a CC
// write that enables, disables or shuts down only records the request and wakes the admin
// thread, which does the work and then sets CSTS.RDY / CSTS.SHST — the host polls those, §7.6.1,
// §7.6.2 — so a vCPU never waits for threads to start or stop and the DeviceActivator is not
// needed); the admin thread (admin commands, enable/disable/reset, queue creation and deletion);
// one NvmeIoWorker per I/O CQ.
//
// Guest errors: a malformed command gets its status code; a doorbell write for a queue that does
// not exist or with a value past the queue's size is ignored, counted and reported as an
// asynchronous event (Error status, Invalid Doorbell Register / Write Value, §5.2); an admin
// queue that is not in RAM at enable, or a controller in an impossible state, sets CSTS.CFS
// (Controller Fatal Status) until the host resets it. Never a tern crash.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "block/disk_config.h"
#include "block/disk_image.h"
#include "block/io_engine.h"
#include "devices/pci/pci_function.h"
#include "devices/pci/pci_function_model.h"

namespace tern::nvme {

/// BAR0 layout.
inline constexpr uint64_t kBar0Bytes = 16 * 1024;
inline constexpr uint32_t kMsixTableOffset = 0x2000;
inline constexpr uint32_t kMsixPbaOffset = 0x3000;
/// I/O queue pairs at most (and so MSI-X vectors: one per CQ, the admin CQ's included).
inline constexpr uint16_t kMaxIoQueues = 64;
inline constexpr uint16_t kMsixVectors = kMaxIoQueues + 1;
/// CAP.MQES + 1.
inline constexpr uint32_t kMaxQueueEntries = 1024;

/// An NVMe disk as the device registry makes it (--disk path=IMG,interface=nvme): the opened
/// image; the controller is built from it when the VM's bus is.
class NvmeDisk final : public PciFunctionModel, public std::enable_shared_from_this<NvmeDisk> {
 public:
  /// Validates `config` (validate_disk_config; a vhost-user socket is refused: "--disk
  /// interface=nvme: not with vhost-user=") and opens the image (DiskImage::open; errors name
  /// the --disk field). `name` is "nvme<N>".
  [[nodiscard]] static Result<std::shared_ptr<NvmeDisk>> create(const DiskConfig& config,
                                                                std::string name);
  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] const DiskImage& disk() const { return disk_; }
  [[nodiscard]] const DiskConfig& config() const { return config_; }
  /// For tests: the I/O workers make their engines with `f` (IoWorkerContext::engine_factory).
  /// Before make_function().
  void set_io_engine_factory(IoEngineFactory f) { engine_factory_ = std::move(f); }
  [[nodiscard]] const IoEngineFactory& io_engine_factory() const { return engine_factory_; }
  /// The controller (an NvmeController); it shares this disk (shared_from_this: the disk must be
  /// owned by a shared_ptr, as create() makes it). One controller at a time: a second call while
  /// the first controller exists is an error; once it is gone (the VM rebuilt after a guest
  /// reset, vm.h "Reset rule") a new one, in its power-on state, may be made.
  [[nodiscard]] Result<std::shared_ptr<PciFunction>> make_function(
      const PciFunctionServices& services) override;

 private:
  NvmeDisk(DiskConfig config, DiskImage disk, std::string name)
      : config_(std::move(config)), disk_(std::move(disk)), name_(std::move(name)) {}
  DiskConfig config_;
  DiskImage disk_;
  std::string name_;
  IoEngineFactory engine_factory_;
  std::weak_ptr<PciFunction> made_;  // the controller built, while it exists
};

/// The controller: a PciFunction (kind "nvme"). Built by NvmeDisk::make_function(). Snapshots:
/// quiesce() parks the admin thread and every worker (in-flight commands completed into their
/// CQs); save_state() writes config space, MSI-X table, registers, features, shadow doorbell
/// addresses, the outstanding Asynchronous Event Requests, and every queue; restore_state()
/// rebuilds the workers. Counters: per I/O queue (QueueCounters as the statistics' queues:
/// kicks = doorbell writes, requests = commands), device-wide "admin_commands", "reads",
/// "writes", "flushes", "write_zeroes", "deallocates", "read_bytes", "written_bytes",
/// "invalid_commands" (non-zero status from parsing), "io_errors" (host I/O failures),
/// "invalid_doorbells", "controller_resets", "controller_fatal", "interrupts_sent",
/// "shadow_doorbell_enabled", and the executor's "bounced" / "bounce_waits".
class NvmeController;  // declared in full in nvme/nvme_controller_impl.h

}  // namespace tern::nvme
