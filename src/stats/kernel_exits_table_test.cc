// Unit tests: the in-kernel exits section of `tern stat --kernel-exits` and --stats-on-exit —
// rates between two snapshots, the reconciliation line, the tables, the unavailable line, and
// compute_rates()/render_rates_table()/render_summary() carrying it only when asked or enabled.
#include "stats/kernel_exits_table.h"

#include <gtest/gtest.h>

#include <limits>

#include "stats/number_text.h"
#include "stats/stats_table.h"
#include "stats/stats_test_snapshot.h"

namespace tern {
namespace {

using Json = nlohmann::json;

// A "kernel_exits" object as KernelExitsStats::json() renders it, counts scaled by k.
Json kernel_exits(uint64_t k, uint64_t since_ns = 1'000'000'000) {
  return {{"enabled", true},
          {"method", "ebpf"},
          {"since_ns", since_ns},
          {"total", 1200 * k},
          {"kvm_exits", 1200 * k + 2},
          {"kvm_exits_edge", 3},
          {"kvm_exits_start_edge", 0},
          {"difference", -2},
          {"vcpus", 2},
          {"userspace_exits", 100 * k},
          {"reasons",
           {{{"isa", "svm"},
             {"code", 1024},
             {"reason", "npf"},
             {"count", 1000 * k},
             {"time_ns", 2'000'000 * k}},
            {{"isa", "svm"},
             {"code", 124},
             {"reason", "msr"},
             {"count", 200 * k},
             {"time_ns", 100'000 * k}}}},
          {"msrs",
           {{{"msr", "0x80b"}, {"name", "X2APIC_EOI"}, {"access", "write"}, {"count", 150 * k}},
            {{"msr", "0x6e0"}, {"name", "TSC_DEADLINE"}, {"access", "write"}, {"count", 40 * k}},
            {{"msr", "0xc0011029"}, {"name", ""}, {"access", "read"}, {"count", 10 * k}}}},
          {"pio", {{{"port", "0x40"}, {"dir", "out"}, {"count", 30 * k}}}},
          {"pio_in_kernel",
           {{{"port", "0x40"},
             {"dir", "out"},
             {"kvm_pio", 30 * k},
             {"userspace", 0},
             {"in_kernel", 30 * k}},
            {{"port", "0x3f8-0x3ff"},
             {"device", "serial0"},
             {"dir", "out"},
             {"kvm_pio", 8 * k},
             {"userspace", 8 * k},
             {"in_kernel", 0}}}},
          {"npf",
           {{{"kind", "ram-not-present"}, {"count", 900 * k}},
            {{"kind", "mmio-cached"},
             {"gpa", "0xfebf1000"},
             {"device", "virtio-blk0"},
             {"count", 100 * k}}}},
          {"injected_irqs", {{{"vector", 236}, {"count", 50 * k}}}},
          {"dropped", 0}};
}

Json snapshot(uint64_t t_ns, uint64_t k, Json kernel) {
  Json s = testing::stats_snapshot(t_ns, k);
  s["kernel_exits"] = std::move(kernel);
  return s;
}

TEST(KernelExitRates, PerSecondOverTheInterval) {
  Json r = kernel_exit_rates(snapshot(2'000'000'000, 1, kernel_exits(1)),
                             snapshot(4'000'000'000, 3, kernel_exits(3)));
  ASSERT_EQ(r["enabled"], true) << r.dump();
  EXPECT_DOUBLE_EQ(r["interval_s"].get<double>(), 2.0);
  const Json& reasons = r["rates"]["reasons"];
  EXPECT_EQ(reasons["npf"]["total"], 3000);
  EXPECT_DOUBLE_EQ(reasons["npf"]["per_s"].get<double>(), 1000.0);  // (3000 - 1000) / 2 s
  EXPECT_DOUBLE_EQ(reasons["npf"]["mean_ns"].get<double>(), 2000.0);
  EXPECT_DOUBLE_EQ(r["rates"]["msrs"]["0x80b X2APIC_EOI write"]["per_s"].get<double>(), 150.0);
  EXPECT_TRUE(r["rates"]["msrs"].contains("0xc0011029 read"));
  EXPECT_DOUBLE_EQ(r["rates"]["pio_in_kernel"]["0x40 out"]["per_s"].get<double>(), 30.0);
  EXPECT_EQ(r["rates"]["pio_in_kernel"]["0x3f8-0x3ff out serial0"]["total"], 0);
  EXPECT_DOUBLE_EQ(r["rates"]["npf"]["mmio-cached 0xfebf1000 virtio-blk0"]["per_s"].get<double>(),
                   100.0);
  EXPECT_DOUBLE_EQ(r["rates"]["injected_irqs"]["vector 236"]["per_s"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(r["rates"]["userspace"]["reached userspace"]["per_s"].get<double>(), 100.0);
  EXPECT_EQ(r["total"], 3600);
  EXPECT_EQ(r["kvm_exits"], 3602);
  EXPECT_EQ(r["difference"], -2);
  EXPECT_EQ(r["bound"], 5);  // edge 3 + 2 vCPUs
  EXPECT_EQ(r["within_bound"], true);
}

// The accounting turned on between the snapshots: the interval starts at its since_ns.
TEST(KernelExitRates, StartedWithinTheInterval) {
  Json prev = snapshot(2'000'000'000, 1, {{"enabled", false}});
  Json r = kernel_exit_rates(prev, snapshot(4'000'000'000, 1, kernel_exits(1, 3'000'000'000)));
  EXPECT_DOUBLE_EQ(r["interval_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(r["rates"]["reasons"]["npf"]["per_s"].get<double>(), 1000.0);
  // Re-enabled (another since_ns): counts from 0 again.
  Json again = kernel_exit_rates(snapshot(2'000'000'000, 5, kernel_exits(5)),
                                 snapshot(4'000'000'000, 1, kernel_exits(1, 3'000'000'000)));
  EXPECT_DOUBLE_EQ(again["rates"]["reasons"]["npf"]["per_s"].get<double>(), 1000.0);
}

TEST(KernelExitRates, UnavailableCarriesTheReason) {
  Json off = snapshot(1, 1, {{"enabled", false}});
  EXPECT_EQ(kernel_exit_rates(off, off), Json({{"enabled", false}}));
  Json failed = snapshot(1, 1, {{"enabled", false}, {"error", "in-kernel exit accounting: x"}});
  EXPECT_EQ(kernel_exit_rates(off, failed),
            Json({{"enabled", false}, {"error", "in-kernel exit accounting: x"}}));
  // An old tern without the object: off.
  EXPECT_EQ(kernel_exit_rates(testing::stats_snapshot(1, 1), testing::stats_snapshot(2, 1)),
            Json({{"enabled", false}}));
}

// A reply from another (or a broken) server: wrong types are "off" or 0, never an exception (a
// nlohmann type_error used to end tern stat with "internal error").
TEST(KernelExitRates, HostileTypesDoNotThrow) {
  for (Json bad :
       {Json{{"enabled", "yes"}}, Json{{"enabled", 1}}, Json(5), Json("on"), Json::array()}) {
    Json prev = snapshot(1'000'000'000, 1, bad), cur = snapshot(2'000'000'000, 2, bad);
    Json r;
    ASSERT_NO_THROW(r = kernel_exit_rates(prev, cur)) << bad.dump();
    EXPECT_EQ(r["enabled"], false) << bad.dump();
    ASSERT_NO_THROW((void)render_kernel_exit_rates(r, 12)) << bad.dump();
    ASSERT_NO_THROW((void)render_kernel_exit_summary(bad)) << bad.dump();
  }
  // Enabled with fields of the wrong types: counted as 0 / empty.
  Json k = kernel_exits(1);
  k["reasons"] = "npf";
  k["msrs"] = Json{{"a", 1}};
  k["npf"] = 7;
  k["total"] = "many";
  k["kvm_exits"] = -5;
  k["difference"] = "x";
  Json r;
  ASSERT_NO_THROW(
      r = kernel_exit_rates(snapshot(1'000'000'000, 1, k), snapshot(2'000'000'000, 2, k)));
  EXPECT_EQ(r["total"], 0);
  EXPECT_EQ(r["kvm_exits"], 0);
  ASSERT_NO_THROW((void)render_kernel_exit_rates(r, 12));
  ASSERT_NO_THROW((void)render_kernel_exit_summary(k));
}

// An error that is not a string is shown as its JSON, not as an empty reason.
TEST(RenderKernelExitRates, NonStringErrorIsShown) {
  Json r = kernel_exit_rates(snapshot(1, 1, {{"enabled", false}}),
                             snapshot(2, 2, {{"enabled", false}, {"error", 42}}));
  EXPECT_EQ(render_kernel_exit_rates(r, 12), "\nin-kernel exits: unavailable: 42\n");
}

// "difference" beyond int64_t: 2^64 - 1 used to read as -1 (within any bound), and INT64_MIN
// was negated (signed overflow).
TEST(KernelExitRates, DifferenceOutOfInt64Range) {
  Json k = kernel_exits(1);
  k["difference"] = std::numeric_limits<uint64_t>::max();
  Json r = kernel_exit_rates(snapshot(1'000'000'000, 1, k), snapshot(2'000'000'000, 2, k));
  EXPECT_EQ(r["within_bound"], false);
  EXPECT_EQ(r["difference"], std::numeric_limits<int64_t>::max());
  k["difference"] = std::numeric_limits<int64_t>::min();
  r = kernel_exit_rates(snapshot(1'000'000'000, 1, k), snapshot(2'000'000'000, 2, k));
  EXPECT_EQ(r["within_bound"], false);
  EXPECT_NE(reconciliation_line(k).find("outside the bound"), std::string::npos)
      << reconciliation_line(k);
}

// human() of a negative or NaN value: it converted them to uint64_t (undefined behaviour).
TEST(HumanNumber, NegativeAndNan) {
  using stats_text::human;
  EXPECT_EQ(human(7), "7");
  EXPECT_EQ(human(12345), "12.3k");
  EXPECT_EQ(human(-7), "-7");
  EXPECT_EQ(human(-1.5), "-1.5");
  EXPECT_EQ(human(-2e6), "-2.00M");
  EXPECT_EQ(human(std::nan("")), "-");
}

TEST(ReconciliationLine, TheBriefsWording) {
  Json k = {{"total", 12345},      {"kvm_exits", 12347},        {"difference", -2},
            {"kvm_exits_edge", 3}, {"kvm_exits_start_edge", 0}, {"vcpus", 2}};
  EXPECT_EQ(reconciliation_line(k),
            "sum 12345 = KVM exits 12347 (difference -2, bound ±5: exits between the two samples "
            "+ 1 in flight per vCPU)");
  k["kvm_exits_start_edge"] = 4;
  EXPECT_EQ(reconciliation_line(k),
            "sum 12345 = KVM exits 12347 (difference -2, bound ±9: exits between the two "
            "samples, 4 while it started, + 1 in flight per vCPU)");
  Json outside = {
      {"total", 100}, {"kvm_exits", 90}, {"difference", 10}, {"kvm_exits_edge", 1}, {"vcpus", 1}};
  EXPECT_EQ(reconciliation_line(outside),
            "sum 100 ≠ KVM exits 90 (difference 10, outside the bound ±2: exits between the two "
            "samples + 1 in flight per vCPU)");
  EXPECT_EQ(reconciliation_line({{"total", 7}, {"kvm_exits_error", "no reconciliation: x"}}),
            "sum 7 (KVM exits: no reconciliation: x)");
}

TEST(RenderKernelExitRates, Sections) {
  Json r = kernel_exit_rates(snapshot(2'000'000'000, 1, kernel_exits(1)),
                             snapshot(4'000'000'000, 3, kernel_exits(3)));
  std::string t = render_kernel_exit_rates(r, 12);
  for (const char* want :
       {"in-kernel exits by reason (all vCPUs)", "npf", "2.0us",
        "sum 3600 = KVM exits 3602 (difference -2, bound ±5",
        "reached userspace: 300 of 3600 (8.3%), 100/s", "in-kernel MSR accesses",
        "0x80b X2APIC_EOI write", "in-kernel PIO (kvm_pio minus exits to tern)", "0x40 out",
        "in-kernel NPF by kind (MMIO: page, device)", "mmio-cached 0xfebf1000 virtio-blk0",
        "in-kernel injected interrupts", "vector 236"})
    EXPECT_NE(t.find(want), std::string::npos) << "want '" << want << "' in:\n" << t;
  // Rows without counts (serial0's PIO all reached tern) are left out.
  EXPECT_EQ(t.find("serial0"), std::string::npos) << t;
  // The top written MSR comes first, named.
  EXPECT_LT(t.find("X2APIC_EOI"), t.find("TSC_DEADLINE"));
  // --rows limits each table.
  std::string one = render_kernel_exit_rates(r, 1);
  EXPECT_NE(one.find("... 2 more"), std::string::npos) << one;
}

TEST(RenderKernelExitRates, UnavailableIsOneLine) {
  EXPECT_EQ(
      render_kernel_exit_rates({{"enabled", false},
                                {"error",
                                 "in-kernel exit accounting: "
                                 "not built into this tern"}},
                               12),
      "\nin-kernel exits: unavailable: in-kernel exit accounting: not built into this tern\n");
  EXPECT_EQ(render_kernel_exit_rates({{"enabled", false}}, 12), "\nin-kernel exits: off\n");
}

// compute_rates() adds the section only when asked; the rest of the table is unchanged by it.
TEST(ComputeRates, KernelExitsOnlyWhenAsked) {
  Json a = snapshot(2'000'000'000, 1, kernel_exits(1)),
       b = snapshot(4'000'000'000, 3, kernel_exits(3));
  Json plain = compute_rates(a, b);
  EXPECT_FALSE(plain.contains("kernel_exits"));
  Json with = compute_rates(a, b, true);
  ASSERT_TRUE(with.contains("kernel_exits"));
  EXPECT_EQ(with["rates"], plain["rates"]);
  std::string t = render_rates_table(with, 12), p = render_rates_table(plain, 12);
  EXPECT_EQ(p.find("in-kernel exits"), std::string::npos);
  EXPECT_TRUE(t.starts_with(p.substr(0, p.find("\nnote:")))) << t;
  EXPECT_NE(t.find("sum 3600 = KVM exits 3602"), std::string::npos) << t;
  // Unavailable: a line with the reason, the other sections as without it.
  Json failed = snapshot(4'000'000'000, 3,
                         {{"enabled", false},
                          {"error",
                           "in-kernel exit "
                           "accounting: EPERM"}});
  std::string u = render_rates_table(compute_rates(a, failed, true), 12);
  EXPECT_NE(u.find("in-kernel exits: unavailable: in-kernel exit accounting: EPERM"),
            std::string::npos)
      << u;
  EXPECT_NE(u.find("exits by reason (all vCPUs)"), std::string::npos) << u;
  EXPECT_NE(u.find("device queues"), std::string::npos) << u;
}

TEST(RenderSummary, KernelExitsWhenEnabled) {
  std::string s = render_summary(snapshot(4'000'000'000, 3, kernel_exits(3)));
  for (const char* want : {"tern: statistics at exit", "in-kernel exits by reason (all vCPUs)",
                           "npf", "sum 3600 = KVM exits 3602", "reached userspace: 300 of 3600",
                           "0x80b X2APIC_EOI write", "vector 236"})
    EXPECT_NE(s.find(want), std::string::npos) << "want '" << want << "' in:\n" << s;
  std::string off = render_summary(snapshot(4'000'000'000, 3, {{"enabled", false}}));
  EXPECT_EQ(off.find("in-kernel exits"), std::string::npos) << off;
  std::string failed = render_summary(
      snapshot(4'000'000'000, 3, {{"enabled", false}, {"error", "in-kernel exit accounting: x"}}));
  EXPECT_NE(failed.find("in-kernel exits: unavailable: in-kernel exit accounting: x"),
            std::string::npos)
      << failed;
  EXPECT_NE(failed.find("exits by reason"), std::string::npos) << failed;
}

}  // namespace
}  // namespace tern
