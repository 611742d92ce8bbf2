// Piix3IsaBridge: the PIIX3 PCI-to-ISA bridge function (00:01.0) with its PIRQ route control
// registers, and the two PIIX3 I/O registers firmware uses: ELCR (0x4D0/0x4D1) and the Reset
// Control register (0xCF9).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "base/log.h"
#include "base/result.h"
#include "bus/bus_device.h"
#include "devices/legacy/byte_io_device.h"
#include "devices/pci/chipset_function.h"
#include "snapshot/codec.h"

namespace tern {

/// 82371SB PIIX3 function 0, 8086:7000, class 060100 (ISA bridge), header type 80h (the slot
/// is multi-function: the PIIX4 PM function sits at 00:01.3). What OVMF needs to turn on its
/// COM1 console and SeaBIOS to route PCI interrupts.
///
/// PIRQRC[A:D] (PIRQx Route Control, 60h-63h), reset 80h each: IRQROUTEN (bit 7, 1 = routing
/// disabled) and IRQ0-3 (bits 3:0, the ISA IRQ PIRQx# is routed to; 3-7, 9-12, 14, 15 valid,
/// others reserved). Bits 6:4 are reserved (read 0). `on_pirq_route(pirq, irq)` is called when a
/// write changes a PIRQ's effective route: irq is the ISA IRQ, or nullopt when routing is
/// disabled or the value is reserved. Runs under the bridge's lock on the vCPU thread.
///
/// Every other device-specific register reads 0 and ignores writes.
class Piix3IsaBridge final : public ChipsetFunction {
 public:
  using PirqHook = std::function<void(unsigned pirq, std::optional<uint8_t> irq)>;

  static constexpr uint16_t kVendorId = 0x8086;
  static constexpr uint16_t kDeviceId = 0x7000;
  static constexpr uint32_t kPirqrc = 0x60;  ///< PIRQRC[A] .. PIRQRC[D] at 60h..63h.
  static constexpr unsigned kPirqCount = 4;
  static constexpr uint8_t kPirqDisabled = 0x80;  ///< IRQROUTEN: routing disabled (reset value).
  static constexpr uint8_t kPirqWritable = 0x8F;

  explicit Piix3IsaBridge(PirqHook on_pirq_route = {});

  [[nodiscard]] std::string_view name() const override { return "piix3"; }
  /// The raw PIRQRC register of PIRQ `pirq` (0 = A .. 3 = D).
  [[nodiscard]] uint8_t pirq_route_control(unsigned pirq) const;
  /// The ISA IRQ PIRQ `pirq` is routed to, or nullopt (disabled or a reserved IRQ number).
  [[nodiscard]] std::optional<uint8_t> pirq_irq(unsigned pirq) const;
  /// Decodes a PIRQRC value: the IRQ, or nullopt when disabled or reserved.
  [[nodiscard]] static std::optional<uint8_t> decode_route(uint8_t value);

  /// Power-on values (PIRQRC 80h); calls on_pirq_route for routes that change.
  void reset();
  // Snapshot: ChipsetFunction::save_state/restore_state (restore calls on_pirq_route for
  // every PIRQ).

 protected:
  void on_config_write(uint32_t offset, size_t len, const std::array<uint8_t, 4>& old) override;
  void after_restore_locked() override;

 private:
  PirqHook on_pirq_route_;
};

/// ELCR1/ELCR2 (Edge/Level Control, I/O 4D0h/4D1h; PIIX3 datasheet §4.1.x): one bit per ISA
/// IRQ, 1 = level-triggered for the 8259. Bits for IRQ 0, 1, 2 (ELCR1) and IRQ 8, 13 (ELCR2)
/// are reserved and read 0. Power-on value 00h. Insert at x86::kElcrPort with length 2.
///
/// With KVM's in-kernel irqchip (KVM_CREATE_IRQCHIP, which tern uses) KVM registers its own
/// ELCR device at 4D0h-4D1h on its PIO bus (virt/kvm i8259 `dev_elcr`), so guest accesses are
/// served by KVM and saved with the PIC in the irqchip state; they never reach this device. It
/// exists for a userspace (split) irqchip and so the bus map shows the ports as claimed.
class Elcr final : public ByteIoDevice {
 public:
  static constexpr uint8_t kElcr1Mask = 0xF8;  ///< IRQ 3-7.
  static constexpr uint8_t kElcr2Mask = 0xDE;  ///< IRQ 9-12, 14, 15.
  Elcr() : ByteIoDevice(2) {}
  [[nodiscard]] std::string_view name() const override { return "elcr"; }
  /// ELCR2:ELCR1 as a 16-bit IRQ mask (bit n = IRQ n level-triggered).
  [[nodiscard]] uint16_t value() const;
  void reset();
  /// Snapshot (version 1).
  void save_state(snap::ByteWriter& w) const;
  /// Restores save_state()'s bytes; reserved bits set are refused. Errors name "elcr".
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 protected:
  uint8_t read_byte(uint64_t offset) override;
  void write_byte(uint64_t offset, uint8_t value) override;

 private:
  mutable std::mutex mu_;
  uint8_t elcr_[2] = {0, 0};
};

/// RC (Reset Control, I/O CF9h, PIIX3 datasheet): SRST (bit 1) selects a hard (1) or soft (0)
/// reset, RCPU (bit 2) set by a write requests it. Reads return the stored SRST bit (RCPU
/// reads 0). Both kinds of reset call `on_reset` (tern resets the whole platform either way).
/// `0x02` then `0x06` is what Linux `reboot=pci` writes; SeaBIOS and OVMF write 0x06 for their
/// reset, which the FADT RESET_REG of firmware boots names (x86::kResetControlHardReset).
///
/// Only one-byte accesses reach it: PciRoot passes a byte access at CF9h here and keeps
/// 32-bit accesses at CF8h as CONFIG_ADDRESS (see PciRoot::set_reset_control). The callback runs
/// on the vCPU thread without the device lock held.
class ResetControl final : public BusDevice {
 public:
  static constexpr uint8_t kSrst = 1u << 1;
  static constexpr uint8_t kRcpu = 1u << 2;
  explicit ResetControl(std::function<void()> on_reset) : on_reset_(std::move(on_reset)) {}
  [[nodiscard]] std::string_view name() const override { return "reset-control"; }
  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;
  /// Reset requests seen (writes with RCPU set).
  [[nodiscard]] uint64_t reset_requests() const { return requests_.load(); }
  [[nodiscard]] uint8_t value() const { return value_.load(); }
  void reset() { value_.store(0); }
  /// Snapshot (version 1): the stored SRST bit.
  void save_state(snap::ByteWriter& w) const;
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 private:
  std::function<void()> on_reset_;
  std::atomic<uint8_t> value_{0};
  std::atomic<uint64_t> requests_{0};
};

}  // namespace tern
