// kvm test: in-kernel exit accounting that cannot start (issue 15's capability-missing path). In a
// child process that has dropped every capability (uid 0 without CAP_BPF, CAP_PERFMON,
// CAP_SYS_ADMIN: what an unprivileged tern has), the real KernelExitTrace::start() is asked for,
// exactly as Vm::build() asks for it with --kernel-exits; it fails with a reason (with the
// stub: "not built into this tern"; with libbpf: the missing privilege). The tiny guest still runs
// and the rest of the statistics are exact: exits per reason and per device, the Prometheus text,
// the --stats-on-exit summary, which carries the reason on one line.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "kvm/kvm_system.h"
#include "stats/stats_table.h"
#include "stats/vm_stats.h"
#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

constexpr uint32_t kPioWrites = 25;  // out to port 0x500 ("counter")

// 64-bit guest code: mov ecx,N; mov dx,0x500; l1: out dx,al; loop l1; mov dx,0x5f1; out dx,al
// (the recorder's "done"); jmp $.
const uint8_t kCode[] = {0xB9, kPioWrites, 0,    0,    0,    0x66, 0xBA, 0x00, 0x05, 0xEE,
                         0xE2, 0xFD,       0x66, 0xBA, 0xF1, 0x05, 0xEE, 0xEB, 0xFE};

class NamedCounter : public BusDevice {
 public:
  std::string_view name() const override { return "counter"; }
  void read(uint64_t, std::span<uint8_t> data) override { std::fill(data.begin(), data.end(), 0); }
  void write(uint64_t, std::span<const uint8_t>) override {}
};

bool drop_all_capabilities() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  return ::syscall(SYS_capset, &hdr, data) == 0;
}

// The child's body: returns "" when every check held, else what did not.
std::string run_without_privilege() {
  auto vm = TinyVm::create(kCode);
  if (!vm) return "TinyVm::create failed";
  if (!vm->pio.insert(std::make_shared<NamedCounter>(), 0x500, 1)) return "insert counter";
  if (!vm->pio.insert(std::make_shared<RecordingDevice>(vm->stop), 0x5f0, 2)) return "insert rec";
  if (!drop_all_capabilities()) return "capset failed";

  VmStats stats(vm->pio, vm->mmio, {});
  stats.add_vcpu(0, vm->stats(), KvmStatsReader::open(vm->vcpu_thread().vcpu().fd()));
  KernelExitTrace::Options o;
  o.tgid = ::getpid();
  o.ram.push_back({0, TinyVm::kRamBytes});
  stats.set_kernel_exit_starter(kernel_exit_trace_starter(o));
  auto on = stats.kernel_exits()->enable();  // what Vm::build() does for --kernel-exits
  if (on) return "KernelExitTrace::start() succeeded without any capability";
  const std::string reason = on.error().message();
  std::fprintf(stderr, "REASON: %s\n", reason.c_str());

  StopEvent e = vm->run();
  if (e.kind != StopKind::kPowerOff) return "guest did not power off: " + e.detail;

  const nlohmann::json j = stats.stats_json();
  std::string bad;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) bad += what + "; ";
  };
  check(j["kernel_exits"] == nlohmann::json({{"enabled", false}, {"error", reason}}),
        "kernel_exits: " + j["kernel_exits"].dump());
  check(reason.rfind("in-kernel exit accounting", 0) == 0, "reason prefix: " + reason);
  // The rest is exact: PIO exits per reason and per device.
  check(j["exits"]["by_reason"].value("KVM_EXIT_IO", 0u) == kPioWrites + 1,
        "KVM_EXIT_IO: " + j["exits"]["by_reason"].dump());
  bool counter = false;
  for (const auto& d : j["devices"])
    if (d["name"] == "counter") counter = d["writes"] == kPioWrites;
  check(counter, "devices: " + j["devices"].dump());
  const std::string metrics = stats.metrics_text();
  check(metrics.find("tern_kernel_exits_enabled 0\n") != std::string::npos, "metrics gauge");
  check(metrics.find("tern_device_accesses_total{device=\"counter\",bus=\"pio\",base=\"0x500\","
                     "op=\"write\"} " +
                     std::to_string(kPioWrites) + "\n") != std::string::npos,
        "metrics device");
  const std::string summary = render_summary(j);
  check(summary.find("  in-kernel exits: unavailable: " + reason + "\n") != std::string::npos,
        "summary: " + summary);
  check(summary.find("exits by reason (all vCPUs)") != std::string::npos, "summary exits");
  // tern stat --kernel-exits over two such snapshots: the reason, once.
  const std::string table = render_rates_table(compute_rates(j, stats.stats_json(), true), 12);
  check(table.find("in-kernel exits: unavailable: " + reason) != std::string::npos,
        "table: " + table);
  return bad;
}

TEST(KernelExitsUnavailable, ReasonReportedAndTheRestOfTheStatsWork) {
  if (!KvmSystem::open()) GTEST_SKIP() << "/dev/kvm not available";
  EXPECT_EXIT(
      {
        std::string bad = run_without_privilege();
        if (!bad.empty()) std::fprintf(stderr, "FAILED: %s\n", bad.c_str());
        std::fflush(stderr);
        std::_Exit(bad.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "REASON: in-kernel exit accounting");
}

}  // namespace
}  // namespace tern::testing
