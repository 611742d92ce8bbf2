// CpuAffinity: which host CPUs tern's vCPU threads and device worker threads may run on
// (--cpu-affinity, machine-config "cpu_affinity"; docs/host-tuning.md). Parsed into a validated
// value first (CPU lists, vCPU indexes, tern's own allowed CPUs), applied by each thread as it
// starts (pthread_setaffinity_np). Cloud Hypervisor's --cpus affinity=, libvirt's <vcpupin>/<iothreadpin>.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace tern {

/// A set of host CPU numbers, ascending, no duplicates (Linux cpulist "0-3,8").
using CpuList = std::vector<unsigned>;

/// Parses a Linux cpulist ("0", "0-3", "0-1,4,6-7"): ascending or not, but no CPU twice and no
/// empty item. Errors name `field`.
[[nodiscard]] Result<CpuList> parse_cpu_list(std::string_view text, const std::string& field);
/// The cpulist text of `cpus` with ranges folded ("0-3,8").
[[nodiscard]] std::string cpu_list_text(const CpuList& cpus);

/// The CPUs this process may run on now (sched_getaffinity(0)): every pinned CPU must be one.
[[nodiscard]] Result<CpuList> process_allowed_cpus();

/// Where each class of tern thread may run; a class not given keeps tern's own affinity.
struct CpuAffinity {
  std::optional<CpuList> vcpus;         ///< "vcpu": every vCPU thread without its own entry.
  std::map<uint32_t, CpuList> vcpu;     ///< "vcpuN": vCPU N's thread.
  /// "io": device workers (virtio queue workers, NVMe I/O and admin threads, block executor
  /// threads, vhost call relays). vhost-net's kernel workers are not tern's threads.
  std::optional<CpuList> io;

  [[nodiscard]] bool empty() const { return !vcpus && vcpu.empty() && !io; }
  /// The CPUs of vCPU `id`'s thread (its own entry, else "vcpu"), if any.
  [[nodiscard]] const CpuList* for_vcpu(uint32_t id) const;
  friend bool operator==(const CpuAffinity&, const CpuAffinity&) = default;
};

/// Parses "vcpu0=0-1,vcpu1=1,io=0" (CLI): items CLASS=CPULIST separated by ',' — a ',' followed
/// by something without '=' continues the CPU list ("vcpu0=0,2,io=1"). Classes: vcpu, vcpuN, io;
/// each at most once. Errors name `option` and the class ("--cpu-affinity vcpu1: ...").
[[nodiscard]] Result<CpuAffinity> parse_cpu_affinity(std::string_view text,
                                                     const std::string& option);
/// Adds one class's entry ("vcpu", "vcpuN", "io") with its cpulist to `a` (the CLI parser and
/// the API's {"vcpu0": "0-1", "io": "0"} share it); errors name `field` ("... vcpu1").
[[nodiscard]] Result<void> add_cpu_affinity_entry(CpuAffinity& a, std::string_view cls,
                                                  std::string_view cpus, const std::string& field);
/// The entries of `a` as (class, cpulist) pairs: "vcpu", "vcpuN" ascending, "io".
[[nodiscard]] std::vector<std::pair<std::string, std::string>> cpu_affinity_entries(
    const CpuAffinity& a);
/// The CLI form of `a` ("vcpu0=0-1,io=0").
[[nodiscard]] std::string cpu_affinity_text(const CpuAffinity& a);

/// Checks `a` against the VM and the host before anything runs: every vCPU index < `vcpus`, every
/// CPU in `allowed` (process_allowed_cpus()). Errors name `field` and the class.
[[nodiscard]] Result<void> check_cpu_affinity(const CpuAffinity& a, uint32_t vcpus,
                                              const CpuList& allowed, const std::string& field);

/// The --cpu-affinity help text (tern run, tern restore).
inline constexpr const char* kCpuAffinityHelp =
    "Pin threads to host CPUs: CLASS=CPULIST items, e.g. vcpu0=0-1,vcpu1=1,io=0. Classes: vcpuN "
    "(vCPU N's thread), vcpu (every other vCPU), io (device workers: virtio queue workers, NVMe "
    "I/O and admin threads, block executor threads). vhost-net's kernel workers are the kernel's "
    "and cannot be pinned by tern. CPUs must be ones tern may run on (docs/host-tuning.md)";

/// The thread classes that pin themselves as they start.
enum class ThreadClass { kVcpu, kIo };

/// Sets the process's affinity plan, read by every thread that starts afterwards (one VM per
/// tern process; set before the VM's threads start, again by a restore). Thread-safe.
void set_cpu_affinity_plan(const CpuAffinity& a);
/// Pins the calling thread as the plan says for `cls` (`index`: the vCPU id); no entry: nothing
/// changes. A failure (the CPU went offline since the check) is logged once, not fatal.
void pin_this_thread(ThreadClass cls, uint32_t index = 0);

}  // namespace tern
