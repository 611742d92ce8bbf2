// Unit tests: one farm line per VM from two snapshots — exits by class, CPU by thread class, net
// and disk rates — and the table/JSON with a VM that failed.
#include "stats/farm_view.h"

#include <gtest/gtest.h>

#include "stats/stats_test_snapshot.h"

namespace tern {
namespace {

using Json = nlohmann::json;

TEST(FarmView, ThreadClassesFromNames) {
  EXPECT_EQ(thread_class("vcpu0"), "vcpu");
  EXPECT_EQ(thread_class("vcpu12"), "vcpu");
  EXPECT_EQ(thread_class("virtio-net0/q1"), "io");
  EXPECT_EQ(thread_class("nvme0/cq1"), "io");
  EXPECT_EQ(thread_class("io-exec"), "io");
  EXPECT_EQ(thread_class("tern"), "control");
  EXPECT_EQ(thread_class("api"), "control");
  EXPECT_EQ(thread_class("vcpux"), "control");
}

// A snapshot with a virtio-net device (rx q0, tx q1) and a worker thread beside stats_snapshot's.
Json with_net(uint64_t t, uint64_t k) {
  Json s = testing::stats_snapshot(t, k);
  s["device_counters"].push_back(
      {{"name", "virtio-net0"},
       {"kind", "virtio-net"},
       {"counters", Json::object()},
       {"queues", {{{"index", 0}, {"bytes", 1000 * k}}, {{"index", 1}, {"bytes", 300 * k}}}}});
  s["threads"].push_back({{"tid", 80}, {"name", "virtio-net0/q1"}, {"user_ns", 10'000'000 * k},
                          {"system_ns", 10'000'000 * k}, {"guest_ns", 0}});
  s["threads"].push_back({{"tid", 70}, {"name", "tern"}, {"user_ns", 2'000'000 * k},
                          {"system_ns", 0}, {"guest_ns", 0}});
  s["exits"]["by_reason"]["KVM_EXIT_HLT"] = 4 * k;
  return s;
}

TEST(FarmView, RowFromTwoSnapshots) {
  // 2 s apart, counters tripled (stats_test_snapshot.h: 10k PIO exits, vcpu0 300M ns user).
  FarmRow r = farm_row(with_net(1'000'000'000, 1), with_net(3'000'000'000, 3));
  EXPECT_DOUBLE_EQ(r.interval_s, 2.0);
  EXPECT_DOUBLE_EQ(r.exits_pio, 10.0);  // (30 - 10) / 2
  EXPECT_DOUBLE_EQ(r.exits_hlt, 4.0);
  EXPECT_DOUBLE_EQ(r.exits_mmio, 0.0);
  EXPECT_DOUBLE_EQ(r.exits, 14.0);
  EXPECT_DOUBLE_EQ(r.kernel_exits, 100.0);  // KVM's "exits": (300 - 100) / 2
  EXPECT_DOUBLE_EQ(r.cpu_vcpu, 30.0);        // 600M ns user in 2 s = 30% (guest not added)
  EXPECT_DOUBLE_EQ(r.cpu_io, 2.0);           // 40M ns in 2 s
  EXPECT_DOUBLE_EQ(r.cpu_control, 0.2);
  EXPECT_DOUBLE_EQ(r.net_rx_bytes, 1000.0);
  EXPECT_DOUBLE_EQ(r.net_tx_bytes, 300.0);
  EXPECT_DOUBLE_EQ(r.disk_bytes, 24576.0);  // virtio-blk0/q0
}

// With the tap's statistics (vhost-net: the queues count nothing) those are the traffic; the
// tap's rx is the guest's TX.
TEST(FarmView, NetRatesFromTheTapWhenPresent) {
  auto tap = [](uint64_t t, uint64_t k) {
    Json s = with_net(t, k);
    s["device_counters"][1]["counters"] = {{"tap_rx_bytes", 50 * k}, {"tap_tx_bytes", 70 * k}};
    return s;
  };
  FarmRow r = farm_row(tap(1'000'000'000, 1), tap(3'000'000'000, 3));
  EXPECT_DOUBLE_EQ(r.net_rx_bytes, 70.0);
  EXPECT_DOUBLE_EQ(r.net_tx_bytes, 50.0);
}

TEST(FarmView, TableAndJsonHaveOneLinePerVmErrorsIncluded) {
  std::vector<FarmLine> lines{
      {"app0", farm_row(with_net(1'000'000'000, 1), with_net(3'000'000'000, 3)), ""},
      {"db0", std::nullopt, "connect: Connection refused"}};
  std::string t = render_farm(lines);
  EXPECT_EQ(t.rfind("VM ", 0), 0u) << t;
  EXPECT_NE(t.find("\napp0                   14      10       0       4       0      100   30.0    2.0"
                   "    0.2     1000B      300B    24.6kB\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\ndb0              error: connect: Connection refused\n"), std::string::npos) << t;
  Json j = farm_json(lines);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["name"], "app0");
  EXPECT_DOUBLE_EQ(j[0]["exits_per_s"]["total"].get<double>(), 14.0);
  EXPECT_EQ(j[1]["error"], "connect: Connection refused");
}

}  // namespace
}  // namespace tern
