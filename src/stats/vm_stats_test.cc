// VmStats with fake DeviceCounters: the "device_counters" JSON shape and the metrics it renders.
#include "stats/vm_stats.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

std::vector<DeviceCounters> fake_devices() {
  DeviceCounters blk{.name = "virtio-blk0",
                     .kind = "virtio-blk",
                     .queues = {{.index = 0,
                                 .kicks = 7,
                                 .requests = 9,
                                 .interrupts = 6,
                                 .interrupts_suppressed = 2,
                                 .bytes = 36864,
                                 .errors = 1},
                                {.index = 1}},
                     .counters = {{"reads", 8}, {"protocol_errors", 3}, {"interrupts_sent", 6}}};
  DeviceCounters rng{.name = "virtio-rng0", .kind = "virtio-rng", .queues = {}, .counters = {}};
  return {blk, rng};
}

TEST(VmStats, DeviceCountersJsonHasEveryField) {
  Bus pio("pio"), mmio("mmio");
  VmStats stats(pio, mmio, fake_devices);
  const nlohmann::json j = stats.stats_json();
  SCOPED_TRACE(j.dump(2));
  ASSERT_TRUE(j["device_counters"].is_array());
  ASSERT_EQ(j["device_counters"].size(), 2u);
  const nlohmann::json& blk = j["device_counters"][0];
  EXPECT_EQ(blk["name"], "virtio-blk0");
  EXPECT_EQ(blk["kind"], "virtio-blk");
  EXPECT_EQ(blk["counters"],
            nlohmann::json({{"reads", 8}, {"protocol_errors", 3}, {"interrupts_sent", 6}}));
  ASSERT_EQ(blk["queues"].size(), 2u);
  EXPECT_EQ(blk["queues"][0], nlohmann::json({{"index", 0},
                                              {"kicks", 7},
                                              {"requests", 9},
                                              {"interrupts", 6},
                                              {"interrupts_suppressed", 2},
                                              {"interrupts_coalesced", 0},
                                              {"poll_hits", 0},
                                              {"poll_ns", 0},
                                              {"bytes", 36864},
                                              {"errors", 1}}));
  EXPECT_EQ(blk["queues"][1]["index"], 1);
  EXPECT_EQ(blk["queues"][1]["kicks"], 0);
  const nlohmann::json& rng = j["device_counters"][1];
  EXPECT_EQ(rng["kind"], "virtio-rng");
  EXPECT_TRUE(rng["counters"].is_object() && rng["counters"].empty());
  EXPECT_TRUE(rng["queues"].is_array() && rng["queues"].empty());
  // The bus ranges keep their own "devices" array.
  EXPECT_TRUE(j["devices"].is_array());
  EXPECT_FALSE(j.contains("queues"));
}

TEST(VmStats, NoDeviceSourceMeansNoDevices) {
  Bus pio("pio"), mmio("mmio");
  VmStats stats(pio, mmio, {});
  EXPECT_EQ(stats.stats_json()["device_counters"], nlohmann::json::array());
}

TEST(VmStats, MetricsIncludeDeviceQueues) {
  Bus pio("pio"), mmio("mmio");
  VmStats stats(pio, mmio, fake_devices);
  const std::string t = stats.metrics_text();
  EXPECT_NE(t.find("tern_device_queue_requests_total{device=\"virtio-blk0\",kind=\"virtio-blk\","
                   "queue=\"0\"} 9\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("tern_device_counter_protocol_errors_total{device=\"virtio-blk0\","
                   "kind=\"virtio-blk\"} 3\n"),
            std::string::npos)
      << t;
}

}  // namespace
}  // namespace tern
