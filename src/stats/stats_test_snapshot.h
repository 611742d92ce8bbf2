// A hand-written GET /tern/stats snapshot for the stats unit tests.
#pragma once

#include <nlohmann/json.hpp>

namespace tern::testing {

/// A snapshot at timestamp `t_ns` whose counters are scaled by `k`.
inline nlohmann::json stats_snapshot(uint64_t t_ns, uint64_t k) {
  return nlohmann::json::parse(R"({
    "version": 1, "timestamp_ns": 0,
    "exits": {"total": 0, "kvm_run_returns": 0, "by_reason": {}},
    "vcpus": [{"id": 0, "exits_total": 0, "kvm_run_returns": 0,
               "exits": {"KVM_EXIT_IO": {"count": 0, "sum_ns": 0, "min_ns": 500, "max_ns": 3000,
                                         "buckets": [[1024, 0], [4096, 0]]}},
               "kvm": {"id": "kvm-1/vcpu-0", "counters": {"exits": 0}, "gauges": {}, "histograms": {}}}],
    "devices": [{"name": "serial0", "bus": "pio", "base": "0x3f8", "len": 8, "reads": 0,
                 "writes": 0, "time_ns": 0}],
    "unclaimed": {"pio": {"reads": 0, "writes": 0, "addresses": [{"addr": "0x510", "reads": 0, "writes": 0}],
                          "other": {"reads": 0, "writes": 0}},
                  "mmio": {"reads": 0, "writes": 0, "addresses": [], "other": {"reads": 0, "writes": 0}}},
    "device_counters": [{"name": "virtio-blk0", "kind": "virtio-blk",
                         "counters": {"reads": 0, "protocol_errors": 0},
                         "queues": [{"index": 0, "kicks": 0, "requests": 0, "interrupts": 0,
                                     "interrupts_suppressed": 0, "bytes": 0, "errors": 0}]}],
    "kvm": {"vm": {"error": "kvm in-kernel stats unavailable: KVM_GET_STATS_FD: Invalid argument"}},
    "threads": [{"tid": 77, "name": "vcpu0", "user_ns": 0, "system_ns": 0, "guest_ns": 0}]
  })")
      .patch(nlohmann::json::parse("[" + [&] {
        auto op = [](const char* path, uint64_t v) {
          return std::string(R"({"op":"replace","path":")") + path + R"(","value":)" +
                 std::to_string(v) + "}";
        };
        return op("/timestamp_ns", t_ns) + "," + op("/exits/total", 10 * k) + "," +
               op("/exits/kvm_run_returns", 10 * k) + "," +
               R"({"op":"add","path":"/exits/by_reason/KVM_EXIT_IO","value":)" +
               std::to_string(10 * k) + "}," + op("/vcpus/0/exits_total", 10 * k) + "," +
               op("/vcpus/0/kvm_run_returns", 10 * k) + "," +
               op("/vcpus/0/exits/KVM_EXIT_IO/count", 10 * k) + "," +
               op("/vcpus/0/exits/KVM_EXIT_IO/sum_ns", 15000 * k) + "," +
               op("/vcpus/0/exits/KVM_EXIT_IO/buckets/0/1", 6 * k) + "," +
               op("/vcpus/0/exits/KVM_EXIT_IO/buckets/1/1", 4 * k) + "," +
               op("/vcpus/0/kvm/counters/exits", 100 * k) + "," + op("/devices/0/writes", 8 * k) +
               "," + op("/devices/0/reads", 2 * k) + "," + op("/devices/0/time_ns", 1000 * k) +
               "," + op("/unclaimed/pio/addresses/0/reads", k) + "," +
               op("/device_counters/0/queues/0/kicks", 5 * k) + "," +
               op("/device_counters/0/queues/0/requests", 6 * k) + "," +
               op("/device_counters/0/queues/0/interrupts", 4 * k) + "," +
               op("/device_counters/0/queues/0/interrupts_suppressed", 2 * k) + "," +
               op("/device_counters/0/queues/0/bytes", 24576 * k) + "," +
               op("/device_counters/0/counters/reads", 6 * k) + "," +
               op("/threads/0/user_ns", 300'000'000 * k) + "," +
               op("/threads/0/guest_ns", 200'000'000 * k);
      }() + "]"));
}

}  // namespace tern::testing
