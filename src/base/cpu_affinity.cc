#include "base/cpu_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>

#include "base/log.h"

namespace tern {

namespace {

// CPU numbers above this are refused as typos (CPU_SETSIZE is 1024).
constexpr unsigned kMaxCpu = CPU_SETSIZE - 1;
// Longest user text an error quotes (a pasted 100 KB list must not come back whole).
constexpr size_t kMaxQuoted = 40;

std::string quoted(std::string_view t) {
  if (t.size() <= kMaxQuoted) return "\"" + std::string(t) + "\"";
  return "\"" + std::string(t.substr(0, kMaxQuoted)) + "...\" (" + std::to_string(t.size()) +
         " bytes)";
}

// One CPU number `t` of `item` (an item of the list: N or N-M).
Result<unsigned> parse_cpu(std::string_view t, std::string_view item, const std::string& field) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || p != t.data() + t.size())
    return fail(field, quoted(item) + " is not a CPU number or range (e.g. 0-1,3)");
  if (v > kMaxCpu)
    return fail(field, "CPU " + std::string(t) + " is above " + std::to_string(kMaxCpu));
  return v;
}

}  // namespace

Result<CpuList> parse_cpu_list(std::string_view text, const std::string& field) {
  if (text.empty()) return fail(field, "empty CPU list (e.g. 0-1,3)");
  CpuList out;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? text.npos
                                                                               : comma - start);
    if (item.empty()) return fail(field, quoted(text) + ": an empty item");
    size_t dash = item.find('-');
    ASSIGN_OR_RETURN(unsigned lo, parse_cpu(item.substr(0, dash), item, field));
    unsigned hi = lo;
    if (dash != std::string_view::npos) {
      ASSIGN_OR_RETURN(hi, parse_cpu(item.substr(dash + 1), item, field));
      if (hi < lo) return fail(field, quoted(item) + ": a range ends below its start");
    }
    for (unsigned c = lo; c <= hi; ++c) {
      if (std::find(out.begin(), out.end(), c) != out.end())
        return fail(field, quoted(text) + ": CPU " + std::to_string(c) + " is given twice");
      out.push_back(c);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string cpu_list_text(const CpuList& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

Result<CpuList> process_allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return fail_errno("sched_getaffinity");
  CpuList out;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

const CpuList* CpuAffinity::for_vcpu(uint32_t id) const {
  auto it = vcpu.find(id);
  if (it != vcpu.end()) return &it->second;
  return vcpus ? &*vcpus : nullptr;
}

Result<void> add_cpu_affinity_entry(CpuAffinity& a, std::string_view cls, std::string_view cpus,
                                    const std::string& field) {
  const std::string where = field + " " + std::string(cls);
  auto twice = [&] { return fail(where, "given more than once"); };
  ASSIGN_OR_RETURN(CpuList list, parse_cpu_list(cpus, where));
  if (cls == "io") {
    if (a.io) return twice();
    a.io = std::move(list);
  } else if (cls == "vcpu") {
    if (a.vcpus) return twice();
    a.vcpus = std::move(list);
  } else if (cls.size() > 4 && cls.substr(0, 4) == "vcpu") {
    uint32_t id = 0;
    std::string_view n = cls.substr(4);
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), id);
    if (ec != std::errc() || p != n.data() + n.size() || (n.size() > 1 && n[0] == '0'))
      return fail(where, "not a vCPU index (vcpu0, vcpu1, ...)");
    if (!a.vcpu.emplace(id, std::move(list)).second) return twice();
  } else {
    return fail(where, "unknown thread class (vcpu, vcpuN, io)");
  }
  return {};
}

Result<CpuAffinity> parse_cpu_affinity(std::string_view text, const std::string& option) {
  CpuAffinity a;
  if (text.empty()) return fail(option, "empty (e.g. vcpu0=0-1,vcpu1=1,io=0)");
  // Items are CLASS=CPULIST; a ','-separated piece without '=' continues the last CPU list.
  std::vector<std::pair<std::string_view, std::string>> items;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string_view piece = text.substr(start, comma == text.npos ? text.npos : comma - start);
    size_t eq = piece.find('=');
    if (eq != std::string_view::npos) {
      if (eq == 0) return fail(option, "\"" + std::string(piece) + "\": no thread class");
      items.emplace_back(piece.substr(0, eq), std::string(piece.substr(eq + 1)));
    } else if (items.empty()) {
      return fail(option, "\"" + std::string(piece) +
                              "\": expected CLASS=CPUS (e.g. vcpu0=0-1,vcpu1=1,io=0)");
    } else {
      items.back().second += "," + std::string(piece);
    }
    if (comma == text.npos) break;
    start = comma + 1;
  }
  for (const auto& [cls, cpus] : items) TRY(add_cpu_affinity_entry(a, cls, cpus, option));
  return a;
}

std::vector<std::pair<std::string, std::string>> cpu_affinity_entries(const CpuAffinity& a) {
  std::vector<std::pair<std::string, std::string>> out;
  if (a.vcpus) out.emplace_back("vcpu", cpu_list_text(*a.vcpus));
  for (const auto& [id, cpus] : a.vcpu) out.emplace_back("vcpu" + std::to_string(id), cpu_list_text(cpus));
  if (a.io) out.emplace_back("io", cpu_list_text(*a.io));
  return out;
}

std::string cpu_affinity_text(const CpuAffinity& a) {
  std::string s;
  for (const auto& [cls, cpus] : cpu_affinity_entries(a))
    s += (s.empty() ? "" : ",") + cls + "=" + cpus;
  return s;
}

Result<void> check_cpu_affinity(const CpuAffinity& a, uint32_t vcpus, const CpuList& allowed,
                                const std::string& field) {
  auto check = [&](const std::string& cls, const CpuList& cpus) -> Result<void> {
    for (unsigned c : cpus)
      if (!std::binary_search(allowed.begin(), allowed.end(), c))
        return fail(field + " " + cls, "CPU " + std::to_string(c) +
                                           " is not one tern may run on (sched_getaffinity: " +
                                           cpu_list_text(allowed) + ")");
    return {};
  };
  for (const auto& [id, cpus] : a.vcpu) {
    if (id >= vcpus)
      return fail(field + " vcpu" + std::to_string(id),
                  "the VM has " + std::to_string(vcpus) + " vCPU" + (vcpus == 1 ? "" : "s") +
                      " (vcpu0..vcpu" + std::to_string(vcpus - 1) + ")");
    TRY(check("vcpu" + std::to_string(id), cpus));
  }
  if (a.vcpus) TRY(check("vcpu", *a.vcpus));
  if (a.io) TRY(check("io", *a.io));
  return {};
}

namespace {
std::mutex g_plan_mu;
CpuAffinity g_plan;  // guarded by g_plan_mu
}  // namespace

void set_cpu_affinity_plan(const CpuAffinity& a) {
  std::lock_guard l(g_plan_mu);
  g_plan = a;
}

void pin_this_thread(ThreadClass cls, uint32_t index) {
  CpuList cpus;
  {
    std::lock_guard l(g_plan_mu);
    const CpuList* p = cls == ThreadClass::kVcpu ? g_plan.for_vcpu(index)
                                                 : (g_plan.io ? &*g_plan.io : nullptr);
    if (!p) return;
    cpus = *p;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : cpus) CPU_SET(c, &set);
  if (int e = ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set); e != 0) {
    static RateLimit limit(4);
    if (limit.allow())
      spdlog::warn("cpu affinity: cannot pin a {} thread to {}: {}",
                   cls == ThreadClass::kVcpu ? "vCPU" : "device worker", cpu_list_text(cpus),
                   std::strerror(e));
  }
}

}  // namespace tern
