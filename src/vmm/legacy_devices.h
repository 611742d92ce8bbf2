// LegacyDevices: the PC devices every tern guest has — COM1 8250 UART with its console, i8042,
// ACPI power registers, CMOS RTC and the port-0x80 sink — and their wiring to the VM.
#pragma once

#include <functional>
#include <memory>

#include "base/result.h"
#include "bus/bus.h"
#include "devices/console/console_input.h"
#include "devices/console/console_output.h"
#include "devices/console/console_target.h"
#include "devices/legacy/acpi_pm.h"
#include "devices/legacy/cmos_rtc.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/post_code_sink.h"
#include "devices/legacy/serial8250.h"
#include "snapshot/codec.h"
#include "vcpu/stop_event.h"

namespace tern {

/// Sets the level of a GSI on the in-kernel irqchip (KVM_IRQ_LINE).
using GsiLevel = std::function<void(uint32_t gsi, bool level)>;

class LegacyDevices {
 public:
  /// Opens the console target (or takes `console_out`, already open: a VM rebuilt after a guest
  /// reset goes on writing to the same file) and creates the devices. Guest power-off and reset
  /// requests (ACPI registers, i8042 0xFE) are posted to `stop` as kPowerOff / kReboot.
  static Result<std::unique_ptr<LegacyDevices>> create(const ConsoleTarget& console,
                                                       std::shared_ptr<ConsoleOutput> console_out,
                                                       GsiLevel irq, StopLatch& stop);
  ~LegacyDevices();

  /// Claims the devices' port ranges on `pio`. `with_acpi_pm` false (firmware boots) leaves out
  /// the ACPI PM registers at 0x600: the chipset's PIIX4 PM block serves them there.
  [[nodiscard]] Result<void> attach(Bus& pio, bool with_acpi_pm = true);
  /// Starts feeding host stdin to the UART when stdin is a terminal or a pipe (a terminal is put
  /// in raw mode, keeping Ctrl-C as a host signal that stops tern). Failure to read stdin is not
  /// fatal: the guest simply gets no input.
  void start();
  /// Stops console input and writes out what the guest printed (bounded wait).
  void shutdown();

  /// The "legacy" section (version 1): UART, i8042, ACPI PM registers, CMOS RTC, each with its
  /// own leading version. Call with the vCPUs paused.
  void save_state(snap::ByteWriter& w) const;
  /// Restores the "legacy" section; call before start() and before vCPUs run. Errors name the
  /// device and field; trailing bytes are an error.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

  [[nodiscard]] I8042& i8042() { return *i8042_; }
  /// The CMOS (firmware boots store the memory-size bytes in it before vCPUs run).
  [[nodiscard]] CmosRtc& cmos() { return *rtc_; }
  [[nodiscard]] Serial8250& serial() { return *serial_; }
  /// The console output (shared with a VM built after a guest reset).
  [[nodiscard]] std::shared_ptr<ConsoleOutput> console_output() const { return console_out_; }

 private:
  LegacyDevices() = default;
  std::shared_ptr<ConsoleOutput> console_out_;
  std::unique_ptr<ConsoleInput> console_in_;
  std::shared_ptr<Serial8250> serial_;
  std::shared_ptr<I8042> i8042_;
  std::shared_ptr<AcpiPm> acpi_pm_;
  std::shared_ptr<CmosRtc> rtc_;
  std::shared_ptr<PostCodeSink> post_code_;
};

}  // namespace tern
