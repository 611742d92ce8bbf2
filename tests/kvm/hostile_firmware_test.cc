// kvm test: a hostile firmware (tests/kvm/hostile_fw/hostile_fw.c, built by CMake with gcc -m32)
// attacks the devices only firmware boots have — fw_cfg (DMA descriptors outside RAM, wrapping
// lengths, unknown control bits, selector sweeps), the pflash (command sequences out of order,
// writes past its end and to the code image) and the PC chipset (PAM/SMRAM, configuration-space
// sweeps, 0xCF8/0xCF9, the PM block) — and checks what the specs say it must see; then it resets
// through the FADT's RESET_REG and, booted again, checks that tern still serves fw_cfg and the
// flash, and powers off. It runs through the real ControlLoop and create_vm_machine with
// --firmware-vars, so tern's reset and exit paths are the ones users get.
// Skipped when /dev/kvm is missing or the firmware could not be built (no gcc).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "api/event_log.h"
#include "base/testing/temp_dir.h"
#include "block/disk_config.h"
#include "stats/stats_source.h"
#include "vmm/control_loop.h"
#include "vmm/exit_status.h"
#include "vmm/vm_machine.h"

namespace tern::testing {
namespace {

#ifdef TERN_HOSTILE_FW_BIN
constexpr const char* kFirmware = TERN_HOSTILE_FW_BIN;
#else
constexpr const char* kFirmware = "";
#endif

// The store hostile_fw.c expects: 64 KiB, "TERNVARS" first, its last 4 KiB block erased.
constexpr size_t kVarsSize = 0x10000;
constexpr size_t kScratch = kVarsSize - 0x1000;

// The phases hostile_fw.c reports; each must print "result=ok".
const std::vector<std::string> kAttackPhases = {
    "fwcfg-registers",   "fwcfg-dma-errors",   "fwcfg-selector-sweep", "flash-sequences",
    "flash-code-writes", "chipset-pam",        "chipset-config-sweep", "chipset-pm",
    "pci-bar-moves",     "alive-after-attacks"};

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

/// The result of one phase as printed ("ok", "fail ..."), or "missing".
std::string phase_result(const std::string& console, const std::string& phase) {
  const std::string key = "TERN-HOSTILE-FW phase=" + phase + " result=";
  const size_t at = console.find(key);
  if (at == std::string::npos) return "missing";
  const size_t end = console.find('\n', at);
  return console.substr(at + key.size(), end == std::string::npos ? end : end - at - key.size());
}

/// The named counter of the device called `name` in GET /tern/stats' "device_counters".
uint64_t device_counter(const nlohmann::json& stats, const std::string& name,
                        const std::string& counter) {
  for (const auto& d : stats["device_counters"])
    if (d["name"] == name) return d["counters"].value(counter, uint64_t{0});
  ADD_FAILURE() << "no device_counters entry " << name;
  return 0;
}

struct HostileVm {
  TempDir dir{"tern-hostile-fw"};
  std::string console = dir.path() + "/console";
  std::string vars = dir.path() + "/vars.fd";
  std::string disk = dir.path() + "/disk.img";  // a virtio-blk function whose BARs are attacked

  HostileVm() {
    std::vector<char> store(kVarsSize, '\xFF');
    const std::string marker = "TERNVARS";
    std::copy(marker.begin(), marker.end(), store.begin());
    for (size_t i = marker.size(); i < kScratch; ++i) store[i] = static_cast<char>(i);
    std::ofstream(vars, std::ios::binary)
        .write(store.data(), static_cast<std::streamsize>(kVarsSize));
    std::ofstream(disk, std::ios::binary)
        .write(store.data(), static_cast<std::streamsize>(kVarsSize));
  }

  VmResources resources(OnReboot on_reboot) const {
    VmResources r;
    BootSource boot;
    boot.firmware_path = kFirmware;
    boot.firmware_vars_path = vars;
    boot.on_reboot = on_reboot;
    r.boot = std::move(boot);
    r.memory_bytes = 64ull << 20;
    r.console = "file:" + console;
    DiskConfig d;
    d.path = disk;
    r.drives.push_back(drive_for_disk(d, 0));
    return r;
  }

  std::vector<uint8_t> store() const {
    std::string s = read_text(vars);
    return {s.begin(), s.end()};
  }
};

bool runnable(std::string& why) {
  if (::access("/dev/kvm", R_OK | W_OK) != 0)
    why = "/dev/kvm not available";
  else if (::access(kFirmware, R_OK) != 0)
    why = "hostile firmware not built (no gcc)";
  return why.empty();
}

TEST(HostileFirmware, AttacksLeaveTernUpThenAnAcpiResetRestartsItAndItPowersOff) {
  std::string why;
  if (!runnable(why)) GTEST_SKIP() << why;
  HostileVm vm;
  EventLog events;
  int status = -1;
  uint64_t resets = 0;
  {
    auto loop = ControlLoop::create(create_vm_machine_on_any_kvm, events);
    ASSERT_TRUE(loop);
    (*loop)->configure(vm.resources(OnReboot::kRestart));
    auto started = (*loop)->start();
    ASSERT_TRUE(started) << started.error().error.message();
    status = (*loop)->run();
    resets = (*loop)->resets();
  }
  const std::string out = read_text(vm.console);
  for (const std::string& phase : kAttackPhases)
    EXPECT_EQ(phase_result(out, phase), "ok") << phase << "\nconsole:\n" << out;
  // The ACPI reset through the FADT's RESET_REG (0xCF9, 0x06) restarted the guest in place; the
  // second boot found the flash byte the first one programmed, and powered off.
  EXPECT_EQ(phase_result(out, "acpi-reset"), "missing") << out;  // no failure line
  EXPECT_NE(out.find("TERN-HOSTILE-FW phase=acpi-reset writing 0x6 to 0xcf9"), std::string::npos)
      << out;
  EXPECT_EQ(phase_result(out, "alive-after-reset"), "ok") << out;
  EXPECT_NE(out.find("TERN-HOSTILE-FW done"), std::string::npos) << out;
  EXPECT_EQ(resets, 1u);
  EXPECT_EQ(status, kExitPowerOff);
  // Both boots' programs reached the vars file (stored whole at exit); the attack's erase of the
  // scratch block's middle did too, and the store's marker is intact.
  const std::vector<uint8_t> store = vm.store();
  ASSERT_EQ(store.size(), kVarsSize);
  EXPECT_EQ(std::string(store.begin(), store.begin() + 8), "TERNVARS");
  EXPECT_EQ(store[kScratch], 0x01);
  EXPECT_EQ(store[kScratch + 1], 0x02);
  EXPECT_EQ(store[kScratch + 0x800], 0xFF);
}

TEST(HostileFirmware, TheAttacksAreCountedAndTheResetExitsWithOnRebootExit) {
  std::string why;
  if (!runnable(why)) GTEST_SKIP() << why;
  HostileVm vm;
  EventLog events;
  auto loop = ControlLoop::create(create_vm_machine_on_any_kvm, events);
  ASSERT_TRUE(loop);
  (*loop)->configure(vm.resources(OnReboot::kExit));
  auto started = (*loop)->start();
  ASSERT_TRUE(started) << started.error().error.message();
  EXPECT_EQ((*loop)->run(), kExitReboot);
  EXPECT_EQ((*loop)->resets(), 0u);
  const std::string out = read_text(vm.console);
  EXPECT_EQ(phase_result(out, "alive-after-attacks"), "ok") << out;
  EXPECT_EQ(out.find("boot=2"), std::string::npos) << out;
  // GET /tern/stats of the VM that ran the attacks.
  ASSERT_NE((*loop)->stats(), nullptr);
  const nlohmann::json stats = (*loop)->stats()->stats_json();
  EXPECT_GE(device_counter(stats, "fw_cfg", "dma_errors"), 13u);
  EXPECT_GE(device_counter(stats, "fw_cfg", "dma_unreachable"), 6u);
  EXPECT_GE(device_counter(stats, "fw_cfg", "bad_accesses"), 5u);
  EXPECT_GE(device_counter(stats, "fw_cfg", "selects"), 2u * 65536);
  EXPECT_GE(device_counter(stats, "pflash", "bad_sequences"), 7u);
  EXPECT_GE(device_counter(stats, "pflash", "erases"), 1u);
  EXPECT_GE(device_counter(stats, "firmware-code", "dropped_writes"), 20u);
}

}  // namespace
}  // namespace tern::testing
