// FwCfgDevice: QEMU's firmware configuration device on x86 I/O ports 0x510..0x51B, with the DMA
// interface (QEMU docs/specs/fw_cfg.rst).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>

#include "base/log.h"
#include "base/result.h"
#include "bus/bus_device.h"
#include "firmware/fw_cfg/fw_cfg_items.h"
#include "memory/guest_memory.h"
#include "snapshot/codec.h"

namespace tern {

/// The fw_cfg device. Insert on the PIO bus at kPortBase with length kPortCount.
///
/// Registers (offsets from kPortBase; fw_cfg.rst "Register Locations", x86):
/// - 0 selector: a 2-byte write selects an item (little-endian) and resets the data offset to 0.
///   Other widths are ignored (QEMU treats a 1-byte write there as a data write, itself ignored).
/// - 1 data: each byte read returns the next byte of the selected item; past its end (or with no
///   item at that key) reads return 0 and leave the offset where it is. Writes are ignored
///   (read-only since QEMU 2.4). A read of width N at offset 0 or 1 returns N item bytes.
/// - 2, 3: unused; read 0xFF, writes ignored.
/// - 4..11 DMA address, big-endian: a 4-byte write at 4 latches the high half; a 4-byte write at
///   8 supplies the low half and starts the operation at (high << 32 | low); an 8-byte write at 4
///   (possible on MMIO) starts it at once. The register reads as "QEMU CFG" (the DMA signature)
///   and is 0 again after each operation. Other accesses there are ignored and counted.
///
/// DMA (fw_cfg.rst "Guest-side DMA Interface"): the FWCfgDmaAccess {be32 control, be32 length,
/// be64 address} at the written address is read through GuestMemory; control bits ERROR (0),
/// READ (1), SKIP (2), SELECT (3, key in bits 31:16), WRITE (4). The request is checked first,
/// then executed: SELECT selects; READ (which wins over SKIP and WRITE, in the spec's order)
/// copies min(length, bytes left in the item) item bytes to `address` — never more than the item
/// holds — and fills the rest of the `length` bytes with 0 (as the data port reads past the end),
/// advancing the offset by the bytes copied; SKIP advances the offset by `length`, capped at the
/// item's end. Control is written back as 0 on success, or as the ERROR bit with nothing done
/// (not even SELECT) when:
/// - WRITE is set without READ (items are read-only to the guest),
/// - ERROR or a bit in 15:5 is set (QEMU ignores unknown bits; refusing them makes a guest's
///   mistake visible),
/// - a READ's [address, address + length) is outside guest RAM, spans two RAM regions, or wraps.
/// A descriptor that itself is not in RAM is counted (dma_unreachable) and nothing is done: there
/// is nowhere to report the error. Failures are counted and logged at a limited rate.
///
/// Thread-safety: read()/write() and the state calls may run concurrently from any thread (one
/// mutex). `mem` must outlive the device.
class FwCfgDevice final : public BusDevice {
 public:
  static constexpr uint16_t kPortBase = 0x510;
  static constexpr uint64_t kPortCount = 12;  ///< 0x510..0x51B.
  static constexpr uint64_t kSelectorOffset = 0;
  static constexpr uint64_t kDataOffset = 1;
  static constexpr uint64_t kDmaOffset = 4;  ///< DMA address, high half; low half at 8.

  // FWCfgDmaAccess control bits (fw_cfg.rst).
  static constexpr uint32_t kDmaError = 1u << 0;
  static constexpr uint32_t kDmaRead = 1u << 1;
  static constexpr uint32_t kDmaSkip = 1u << 2;
  static constexpr uint32_t kDmaSelect = 1u << 3;
  static constexpr uint32_t kDmaWrite = 1u << 4;
  /// What reading the DMA address register returns: "QEMU CFG" read as a big-endian u64.
  static constexpr uint64_t kDmaSignature = 0x51454d5520434647ull;

  /// Counters (monotonic since creation; not saved in snapshots).
  struct Stats {
    uint64_t selects = 0;          ///< Selector writes and DMA SELECTs.
    uint64_t data_reads = 0;       ///< Data-port bytes read.
    uint64_t dma_ops = 0;          ///< DMA operations started (descriptor reachable).
    uint64_t dma_bytes = 0;        ///< Item bytes copied to the guest by DMA.
    uint64_t dma_errors = 0;       ///< Operations answered with the ERROR bit.
    uint64_t dma_unreachable = 0;  ///< Descriptor address outside RAM: nothing done.
    uint64_t bad_accesses = 0;     ///< Ignored accesses: wrong width/offset, data-port writes.
  };

  FwCfgDevice(const GuestMemory& mem, fw_cfg::FwCfgItems items);

  [[nodiscard]] std::string_view name() const override { return "fw_cfg"; }
  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;

  [[nodiscard]] Stats stats() const;
  /// The item table served (read-only).
  [[nodiscard]] const fw_cfg::FwCfgItems& items() const { return items_; }

  /// Snapshot: the selector, the data offset and the DMA address latch (high half). The items
  /// are not saved: the VM builder rebuilds them from the VM config before restore_state().
  /// Version 1.
  void save_state(snap::ByteWriter& w) const;
  /// Restores what save_state() wrote. Errors name "fw_cfg" and the field (an offset past the
  /// selected item's end is refused: the item table differs from the saved VM's).
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 private:
  uint8_t next_data_byte();                                                   // mu_ held
  void select(uint16_t key);                                                  // mu_ held
  void write_dma_register(uint64_t offset, std::span<const uint8_t> data);    // mu_ held
  void run_dma(uint64_t descriptor_gpa);                                      // mu_ held
  uint32_t execute_dma(uint32_t control, uint32_t length, uint64_t address);  // mu_ held

  const GuestMemory& mem_;
  const fw_cfg::FwCfgItems items_;
  mutable std::mutex mu_;
  uint16_t selector_ = 0;
  const std::vector<uint8_t>* item_ = nullptr;  // items_.find(selector_)
  uint32_t offset_ = 0;
  uint32_t dma_high_ = 0;  // latched high half of the DMA address
  Stats stats_;
  RateLimit log_limit_{5};
};

}  // namespace tern
