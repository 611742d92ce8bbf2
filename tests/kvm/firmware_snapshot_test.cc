// kvm test: snapshot/restore of a firmware-booted VM (issue 26 item 4). Debian's unmodified
// SeaBIOS (bios-256k.bin, no disk) runs to "No bootable device" on the serial console, is paused
// and saved; the restored VM goes on in SeaBIOS from there: its boot-fail-wait ends in the PIIX3
// reset (0xCF9: the chipset, fw_cfg and the firmware mapping came back), the restored machine
// restarts on that reboot (the on_reboot the snapshot recorded) and the reset boots SeaBIOS again
// on the same console. A changed firmware file is refused by name.
// Skipped when /dev/kvm or /usr/share/seabios/bios-256k.bin is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "base/testing/temp_dir.h"
#include "vmm/vm_machine.h"

namespace tern::testing {
namespace {

constexpr const char* kBios = "/usr/share/seabios/bios-256k.bin";

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

/// Waits (bounded: 120 s) until the console file holds `what` `times` times.
bool console_shows(const std::string& path, const std::string& what, size_t times = 1) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (count(read_text(path), what) >= times) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

/// The guest's next stop, or a kStopped posted by the test after 120 s (a guest that hangs).
StopEvent stop_within(Machine& m) {
  std::atomic<bool> done{false};
  std::thread guard([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!done && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) m.stop(StopEvent{StopKind::kStopped, -1, 0, "test: no stop within 120 s"});
  });
  StopEvent e = m.wait_stopped();
  done = true;
  guard.join();
  return e;
}

TEST(FirmwareSnapshot, SeaBiosGoesOnAfterARestoreAndRebootsThroughItself) {
  if (::access("/dev/kvm", R_OK | W_OK) != 0) GTEST_SKIP() << "/dev/kvm not available";
  if (::access(kBios, R_OK) != 0) GTEST_SKIP() << "no " << kBios << " (Debian package seabios)";
  TempDir dir{"tern-fwsnap"};
  const std::string console1 = dir.path() + "/console1", console2 = dir.path() + "/console2";
  const std::string bios = dir.path() + "/bios.bin";
  {
    std::ifstream in(kBios, std::ios::binary);
    std::ofstream(bios, std::ios::binary) << in.rdbuf();
  }
  SnapshotCreateSpec save;
  save.snapshot_path = dir.path() + "/vm.state";
  save.mem_file_path = dir.path() + "/vm.mem";
  {
    VmConfig c;
    c.firmware_path = bios;
    c.memory_bytes = 64ull << 20;
    c.console = "file:" + console1;
    auto m = create_vm_machine_on_any_kvm(c);
    ASSERT_TRUE(m) << m.error().error.message();
    (*m)->start();
    ASSERT_TRUE(console_shows(console1, "No bootable device")) << read_text(console1);
    (*m)->pause();
    std::atomic<bool> cancel{false};
    auto saved = (*m)->save_snapshot(save, {}, cancel);
    ASSERT_TRUE(saved) << saved.error().message();
    (*m)->finish();
  }
  SnapshotLoadSpec load;
  load.snapshot_path = save.snapshot_path;
  load.mem_file_path = save.mem_file_path;
  {
    VmResources r;
    r.console = "file:" + console2;
    auto m = create_restored_machine_on_any_kvm(load, r);
    ASSERT_TRUE(m) << m.error().error.message();
    EXPECT_EQ((*m)->on_reboot(), OnReboot::kRestart);  // a firmware boot's default, saved
    ASSERT_TRUE(r.boot && r.boot->firmware_path);
    EXPECT_EQ(*r.boot->firmware_path, bios);  // GET /vm/config of the restored VM
    (*m)->start();
    // No new banner: the restored SeaBIOS goes on from its boot-failure wait to its reset.
    StopEvent e = stop_within(**m);
    EXPECT_EQ(e.kind, StopKind::kReboot) << e.detail;
    EXPECT_EQ(e.detail, "KVM_EXIT_IO: PIIX3 reset control 0xCF9");
    EXPECT_EQ(count(read_text(console2), "SeaBIOS (version"), 0u) << read_text(console2);
    // Restart in place: SeaBIOS boots again from the reset vector, on the same console.
    auto reset = (*m)->reset();
    ASSERT_TRUE(reset) << reset.error().message();
    (*m)->start();
    EXPECT_TRUE(console_shows(console2, "SeaBIOS (version")) << read_text(console2);
    EXPECT_TRUE(console_shows(console2, "No bootable device")) << read_text(console2);
    (*m)->stop(StopEvent{StopKind::kStopped, -1, 0, "test"});
    (*m)->finish();
  }
  // The firmware file changed since the save: refused, naming it, before anything is built.
  {
    std::fstream f(bios, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(1000);
    f.put('\x5a');
  }
  VmResources r;
  r.console = "file:" + console2;
  auto refused = create_restored_machine_on_any_kvm(load, r);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().error.message().find("the firmware file " + bios + " changed"),
            std::string::npos)
      << refused.error().error.message();
}

}  // namespace
}  // namespace tern::testing
