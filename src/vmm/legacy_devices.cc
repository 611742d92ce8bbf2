#include "vmm/legacy_devices.h"

#include <sys/stat.h>
#include <unistd.h>

#include "arch/x86/layout.h"
#include "base/log.h"
#include "devices/legacy/i8042_port.h"
#include "vcpu/vcpu_thread.h"

namespace tern {

Result<std::unique_ptr<LegacyDevices>> LegacyDevices::create(
    const ConsoleTarget& console, std::shared_ptr<ConsoleOutput> console_out, GsiLevel irq,
    StopLatch& stop) {
  auto d = std::unique_ptr<LegacyDevices>(new LegacyDevices());
  if (console_out) {
    d->console_out_ = std::move(console_out);
  } else {
    auto out = ConsoleOutput::create(console);
    if (!out) return fail("--console", out.error().message());
    d->console_out_ = std::move(*out);
  }
  auto line = [irq](uint32_t gsi) { return IrqLine([irq, gsi](bool level) { irq(gsi, level); }); };
  d->serial_ = std::make_shared<Serial8250>(line(x86::kSerialIrq), d->console_out_->sink());
  // Device callbacks run on the vCPU thread that did the PIO write: the event names it and its RIP.
  auto post = [&stop](StopKind kind, const char* why) {
    stop.post(VcpuThread::stop_event_here(kind, why));
  };
  auto power_off = [post] { post(StopKind::kPowerOff, "KVM_EXIT_IO: ACPI PM1a_CNT S5 (power off)"); };
  auto reset_acpi = [post] { post(StopKind::kReboot, "KVM_EXIT_IO: ACPI reset register"); };
  auto reset_kbd = [post] { post(StopKind::kReboot, "KVM_EXIT_IO: i8042 reset command 0xFE"); };
  d->i8042_ = std::make_shared<I8042>(line(x86::kI8042KbdIrq), reset_kbd);
  d->acpi_pm_ = std::make_shared<AcpiPm>(power_off, reset_acpi);
  d->rtc_ = std::make_shared<CmosRtc>();
  d->post_code_ = std::make_shared<PostCodeSink>();
  return d;
}

LegacyDevices::~LegacyDevices() { shutdown(); }

Result<void> LegacyDevices::attach(Bus& pio, bool with_acpi_pm) {
  TRY(pio.insert(serial_, x86::kSerialPort, Serial8250::kRegisterCount));
  TRY(insert_i8042(pio, i8042_));
  if (with_acpi_pm) TRY(pio.insert(acpi_pm_, x86::kAcpiPm1aEvtPort, AcpiPm::kRegisterCount));
  TRY(pio.insert(rtc_, x86::kCmosPort, CmosRtc::kPortCount));
  TRY(pio.insert(post_code_, x86::kPostCodePort, 1));
  return {};
}

void LegacyDevices::start() {
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) != 0) return;
  bool usable = ::isatty(STDIN_FILENO) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
  if (!usable) return;
  ConsoleInputOptions opts;
  opts.keep_signals = true;
  auto in = ConsoleInput::create(BorrowedFd(STDIN_FILENO), *serial_, opts);
  if (!in) {
    spdlog::warn("console input disabled: {}", in.error().message());
    return;
  }
  console_in_ = std::move(*in);
}

void LegacyDevices::shutdown() {
  if (console_in_) console_in_->stop();
  console_in_.reset();
  if (console_out_) console_out_->flush(std::chrono::seconds(2));
}

}  // namespace tern

namespace tern {

namespace {
constexpr uint32_t kLegacyVersion = 1;
}  // namespace

void LegacyDevices::save_state(snap::ByteWriter& w) const {
  w.u32(kLegacyVersion);
  serial_->save_state(w);
  i8042_->save_state(w);
  acpi_pm_->save_state(w);
  rtc_->save_state(w);
}

Result<void> LegacyDevices::restore_state(snap::ByteReader& r) {
  ASSIGN_OR_RETURN(uint32_t v, r.u32());
  if (v != kLegacyVersion)
    return fail("restore legacy devices", "version " + std::to_string(v) + " (this tern reads " +
                                              std::to_string(kLegacyVersion) + ")");
  TRY(serial_->restore_state(r));
  TRY(i8042_->restore_state(r));
  TRY(acpi_pm_->restore_state(r));
  TRY(rtc_->restore_state(r));
  return r.expect_end();
}

}  // namespace tern
