// Unit tests: --cpu-affinity parsing and checks (errors name the class), and a thread pinning
// itself lands where asked (its /proc/thread-self/status Cpus_allowed_list).
#include "base/cpu_affinity.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>
#include <thread>

namespace tern {
namespace {

std::string err(const Result<CpuAffinity>& r) { return r ? "" : r.error().message(); }

TEST(CpuList, ParsesRangesAndRefusesBadOnes) {
  auto l = parse_cpu_list("6-7,0-1,4", "f");
  ASSERT_TRUE(l) << l.error().message();
  EXPECT_EQ(*l, (CpuList{0, 1, 4, 6, 7}));
  EXPECT_EQ(cpu_list_text(*l), "0-1,4,6-7");
  EXPECT_EQ(parse_cpu_list("", "f").error().message(), "f: empty CPU list (e.g. 0-1,3)");
  EXPECT_EQ(parse_cpu_list("0,,1", "f").error().message(), "f: \"0,,1\": an empty item");
  EXPECT_EQ(parse_cpu_list("x", "f").error().message(),
            "f: \"x\" is not a CPU number or range (e.g. 0-1,3)");
  // A missing end or start names the item, not the empty side of its dash.
  EXPECT_EQ(parse_cpu_list("-1", "f").error().message(),
            "f: \"-1\" is not a CPU number or range (e.g. 0-1,3)");
  EXPECT_EQ(parse_cpu_list("0,1-", "f").error().message(),
            "f: \"1-\" is not a CPU number or range (e.g. 0-1,3)");
  // A long list is quoted cut short, with its length.
  std::string longlist = "0";
  for (int i = 1; i < 20000; ++i) longlist += ",0";
  std::string m = parse_cpu_list(longlist, "f").error().message();
  EXPECT_LT(m.size(), 120u) << m;
  EXPECT_NE(m.find("(39999 bytes)"), std::string::npos) << m;
  EXPECT_EQ(parse_cpu_list("3-1", "f").error().message(),
            "f: \"3-1\": a range ends below its start");
  EXPECT_EQ(parse_cpu_list("0-2,1", "f").error().message(), "f: \"0-2,1\": CPU 1 is given twice");
  EXPECT_EQ(parse_cpu_list("4096", "f").error().message(), "f: CPU 4096 is above 1023");
  EXPECT_FALSE(parse_cpu_list("-1", "f"));
  EXPECT_FALSE(parse_cpu_list("1-", "f"));
}

TEST(CpuAffinity, ParsesTheCliForm) {
  auto a = parse_cpu_affinity("vcpu0=0-1,vcpu1=1,io=0", "--cpu-affinity");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->vcpu.at(0), (CpuList{0, 1}));
  EXPECT_EQ(a->vcpu.at(1), (CpuList{1}));
  EXPECT_EQ(a->io, (CpuList{0}));
  EXPECT_FALSE(a->vcpus);
  EXPECT_EQ(cpu_affinity_text(*a), "vcpu0=0-1,vcpu1=1,io=0");
  // A piece without '=' continues the CPU list before it.
  auto b = parse_cpu_affinity("vcpu=0,2,io=1,3-4", "--cpu-affinity");
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(b->vcpus, (CpuList{0, 2}));
  EXPECT_EQ(b->io, (CpuList{1, 3, 4}));
  EXPECT_EQ(*b->for_vcpu(7), (CpuList{0, 2}));
  EXPECT_EQ(a->for_vcpu(7), nullptr);
  EXPECT_EQ(*parse_cpu_affinity(cpu_affinity_text(*b), "x"), *b);
}

TEST(CpuAffinity, RefusesBadInputNamingTheClass) {
  const std::string o = "--cpu-affinity";
  EXPECT_EQ(err(parse_cpu_affinity("", o)), "--cpu-affinity: empty (e.g. vcpu0=0-1,vcpu1=1,io=0)");
  EXPECT_EQ(err(parse_cpu_affinity("0-1", o)),
            "--cpu-affinity: \"0-1\": expected CLASS=CPUS (e.g. vcpu0=0-1,vcpu1=1,io=0)");
  EXPECT_EQ(err(parse_cpu_affinity("=1", o)), "--cpu-affinity: \"=1\": no thread class");
  EXPECT_EQ(err(parse_cpu_affinity("vcpu0=1,vcpu0=0", o)),
            "--cpu-affinity vcpu0: given more than once");
  EXPECT_EQ(err(parse_cpu_affinity("io=1,io=0", o)), "--cpu-affinity io: given more than once");
  EXPECT_EQ(err(parse_cpu_affinity("net=1", o)),
            "--cpu-affinity net: unknown thread class (vcpu, vcpuN, io)");
  EXPECT_EQ(err(parse_cpu_affinity("vcpux=1", o)),
            "--cpu-affinity vcpux: not a vCPU index (vcpu0, vcpu1, ...)");
  EXPECT_EQ(err(parse_cpu_affinity("vcpu01=1", o)),
            "--cpu-affinity vcpu01: not a vCPU index (vcpu0, vcpu1, ...)");
  EXPECT_EQ(err(parse_cpu_affinity("vcpu0=1-0", o)),
            "--cpu-affinity vcpu0: \"1-0\": a range ends below its start");
  EXPECT_EQ(err(parse_cpu_affinity("io=", o)), "--cpu-affinity io: empty CPU list (e.g. 0-1,3)");
}

TEST(CpuAffinity, CheckRefusesVcpuIndexesAndCpusTernMayNotUse) {
  auto a = parse_cpu_affinity("vcpu2=0,io=1", "--cpu-affinity");
  ASSERT_TRUE(a);
  EXPECT_EQ(check_cpu_affinity(*a, 2, {0, 1}, "--cpu-affinity").error().message(),
            "--cpu-affinity vcpu2: the VM has 2 vCPUs (vcpu0..vcpu1)");
  EXPECT_TRUE(check_cpu_affinity(*a, 3, {0, 1}, "--cpu-affinity"));
  EXPECT_EQ(check_cpu_affinity(*a, 3, {0, 2, 3}, "machine-config.cpu_affinity").error().message(),
            "machine-config.cpu_affinity io: CPU 1 is not one tern may run on "
            "(sched_getaffinity: 0,2-3)");
  auto allowed = process_allowed_cpus();
  ASSERT_TRUE(allowed) << allowed.error().message();
  EXPECT_FALSE(allowed->empty());
}

std::string cpus_allowed_list_of_this_thread() {
  std::ifstream f("/proc/thread-self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      size_t i = line.find_first_not_of(" \t", 18);
      return line.substr(i);
    }
  return "?";
}

// An io thread and vCPU 1's thread pin themselves to the plan's CPUs; a vCPU without an entry
// keeps tern's affinity. Uses the last CPU tern may run on (also on a 1-CPU host).
TEST(CpuAffinity, ThreadsLandWhereAsked) {
  auto allowed = process_allowed_cpus();
  ASSERT_TRUE(allowed && !allowed->empty());
  const std::string last = std::to_string(allowed->back());
  const std::string all = cpu_list_text(*allowed);
  auto a = parse_cpu_affinity("vcpu1=" + last + ",io=" + last, "--cpu-affinity");
  ASSERT_TRUE(a);
  set_cpu_affinity_plan(*a);
  std::string io, vcpu1, vcpu0;
  int cpu_io = -1;
  std::thread([&] {
    pin_this_thread(ThreadClass::kIo);
    io = cpus_allowed_list_of_this_thread();
    cpu_io = sched_getcpu();
  }).join();
  std::thread([&] {
    pin_this_thread(ThreadClass::kVcpu, 1);
    vcpu1 = cpus_allowed_list_of_this_thread();
  }).join();
  std::thread([&] {
    pin_this_thread(ThreadClass::kVcpu, 0);
    vcpu0 = cpus_allowed_list_of_this_thread();
  }).join();
  set_cpu_affinity_plan({});
  EXPECT_EQ(io, last);
  EXPECT_EQ(cpu_io, static_cast<int>(allowed->back()));
  EXPECT_EQ(vcpu1, last);
  EXPECT_EQ(vcpu0, all);
}

}  // namespace
}  // namespace tern
