// PciRoot: PCI bus 0 behind a host bridge — configuration mechanism #1 on ports 0xCF8-0xCFF, the
// devices in slots 1-31, and one MMIO dispatcher for the whole 32-bit PCI window that routes
// accesses to whichever BAR the guest currently has there.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>

#include "base/log.h"
#include "base/result.h"
#include "bus/bus.h"
#include "devices/pci/pci_device.h"
#include "devices/pci/pci_function.h"
#include "snapshot/codec.h"

namespace tern {

/// The Bus map is fixed once vCPUs run, but guests move BARs: so the root claims the window
/// [mmio_base, mmio_base + mmio_size) once and keeps its own table of decoded BARs, rebuilt after
/// every config write (under a shared_mutex: MMIO accesses take it shared). Accesses outside
/// every BAR read all-ones and are counted.
///
/// Config mechanism #1 (PCI 3.0 §3.2.2.3.2): a dword write to 0xCF8 selects bus/device/function/
/// register with bit 31 set; 0xCFC-0xCFF then access that dword. Only bus 0 exists; absent
/// functions read all-ones. Slot 0 is the host bridge (Red Hat 1b36:0008, class 0600, unless
/// set_host_bridge chose another). Functions 1-7 of a slot exist only through add_function().
class PciRoot {
 public:
  /// The MMIO window BARs are placed in (guest-physical).
  PciRoot(uint64_t mmio_base, uint64_t mmio_size);
  ~PciRoot();

  /// Puts `dev` at function 0 of the next slot (1..31) with no function in it and returns the
  /// slot. Before vCPUs run only.
  [[nodiscard]] Result<uint8_t> add(std::shared_ptr<PciDevice> dev);
  /// The slot add() would use next (e.g. to place a function's INTx by its slot before adding
  /// it: piix_intx_irq on firmware boots), or nullopt when all are in use.
  [[nodiscard]] std::optional<uint8_t> next_free_slot() const;
  /// Puts `dev` at `slot` (0..31) function `function` (0..7); the slot then reports itself
  /// multi-function (header type bit 7 of function 0) when any function other than 0 is
  /// present. Errors: out of range, or the place is taken (00:00.0 is the host bridge: use
  /// set_host_bridge). Before vCPUs run only.
  [[nodiscard]] Result<void> add_function(uint8_t slot, uint8_t function,
                                          std::shared_ptr<PciDevice> dev);
  /// Replaces the default host bridge (Red Hat 1b36:0008) at 00:00.0, e.g. with the i440FX of
  /// firmware boots. Before vCPUs run only.
  void set_host_bridge(std::shared_ptr<PciDevice> bridge);
  /// Byte accesses to port 0xCF9 go to `rc` (the PIIX3 Reset Control register) instead of
  /// reading all-ones; 32-bit accesses at 0xCF8 stay CONFIG_ADDRESS. Before vCPUs run only.
  void set_reset_control(std::shared_ptr<BusDevice> rc);
  /// Reserves `size` bytes (a power of two) of the MMIO window, size-aligned, for a BAR's initial
  /// (firmware) address. Before vCPUs run only.
  [[nodiscard]] Result<uint64_t> allocate_mmio(uint64_t size);
  /// allocate_mmio() for each of `bars` in order (firmware's initial assignment of a function's
  /// declared BARs); the result has the addresses, INTx not wired. Before vCPUs run only.
  [[nodiscard]] Result<PciPlacement> allocate_bars(const std::vector<PciBarDecl>& bars);
  /// Claims 0xCF8-0xCFF on `pio` and the MMIO window on `mmio`.
  [[nodiscard]] Result<void> attach(Bus& pio, Bus& mmio);

  /// Config read/write for bus 0 (tests, and the config port).
  void config_read(uint8_t slot, uint8_t function, uint32_t offset, std::span<uint8_t> data);
  void config_write(uint8_t slot, uint8_t function, uint32_t offset, std::span<const uint8_t> data);

  /// The PIO device for ports 0xCF8-0xCFF and the MMIO window device (exposed for tests).
  [[nodiscard]] std::shared_ptr<BusDevice> config_port() const { return config_port_; }
  [[nodiscard]] std::shared_ptr<BusDevice> mmio_window() const { return mmio_window_; }
  [[nodiscard]] uint64_t mmio_base() const { return mmio_base_; }
  [[nodiscard]] uint64_t mmio_size() const { return mmio_size_; }
  /// Snapshot (version 1): the CONFIG_ADDRESS register (0xCF8) and the host bridge's config
  /// space. Restore checks and applies its standard header (00h-3Fh); device-specific registers
  /// (40h-FFh: the i440FX's PAM/SMRAM) belong to the bridge's own state (PcChipset). The
  /// functions in slots 1-31 save their own state.
  void save_state(snap::ByteWriter& w) const;
  /// Restores save_state()'s bytes; errors name "pci-root" and the field.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);
  /// Rebuilds the BAR dispatch table from the devices (after their state was restored).
  void refresh_bar_mappings() { refresh_mappings(); }

  /// MMIO accesses inside the window that hit no BAR.
  [[nodiscard]] uint64_t stray_mmio() const { return stray_mmio_.load(); }
  /// The guest's MMIO accesses dispatched to the BARs of the function in `slot` (0..31), each one
  /// a vCPU exit to tern (an access KVM serves through an ioeventfd never reaches the window).
  /// The bus accounting sees the whole window as one range ("pci-mmio"); this attributes it to
  /// functions. Any thread.
  [[nodiscard]] const DeviceAccessCounters& bar_access(uint8_t slot) const {
    return bar_access_[slot % bar_access_.size()];
  }

 private:
  class ConfigPort;
  class MmioWindow;
  struct Mapping {
    uint64_t gpa, size;
    uint8_t bar;
    uint8_t slot;
    PciDevice* dev;
  };
  void mmio_access(uint64_t gpa, std::span<uint8_t> rd, std::span<const uint8_t> wr, bool write);
  void refresh_mappings();
  /// The function at slot/function, or null. Before vCPUs run the arrays change; after, const.
  [[nodiscard]] PciDevice* function_at(uint8_t slot, uint8_t function) const;

  uint64_t mmio_base_, mmio_size_, next_mmio_;
  std::array<std::shared_ptr<PciDevice>, 32> slots_;  // function 0 of each slot
  std::array<std::array<std::shared_ptr<PciDevice>, 7>, 32> more_functions_;  // functions 1-7
  std::shared_ptr<BusDevice> reset_control_;  // port 0xCF9 (byte accesses); may be null
  mutable std::mutex config_mu_;  // serialises config mechanism accesses and mapping rebuilds
  uint32_t config_address_ = 0;
  std::shared_mutex map_mu_;
  std::vector<Mapping> mappings_;
  std::shared_ptr<BusDevice> config_port_;
  std::shared_ptr<BusDevice> mmio_window_;
  std::atomic<uint64_t> stray_mmio_{0};
  std::array<DeviceAccessCounters, 32> bar_access_;  // per slot
  RateLimit log_limit_{5};
};

}  // namespace tern
