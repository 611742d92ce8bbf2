// Host CPU time per tern thread, from /proc/self/task/<tid>/stat.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace tern {

/// CPU time one thread has used (ns, at the kernel's clock-tick resolution).
struct ThreadCpu {
  pid_t tid = 0;
  std::string name;        ///< comm, e.g. "vcpu0", "tern"
  uint64_t user_ns = 0;    ///< utime: user mode, guest time included (as the kernel counts it)
  uint64_t system_ns = 0;  ///< stime: kernel mode
  uint64_t guest_ns = 0;   ///< guest_time: running guest code (part of user_ns)
  int last_cpu = -1;       ///< processor (field 39): the CPU it last ran on
  /// Cpus_allowed_list of /proc/<pid>/task/<tid>/status: where it may run ("0-1"); "" unread.
  std::string cpus_allowed;
};

/// Parses one /proc/<pid>/task/<tid>/stat line; `ns_per_tick` = 1e9 / sysconf(_SC_CLK_TCK).
/// Nullopt when the line is malformed.
std::optional<ThreadCpu> parse_task_stat(std::string_view line, uint64_t ns_per_tick);

/// This process as a whole (/proc/self/stat): includes threads that have already exited.
[[nodiscard]] Result<ThreadCpu> read_process_cpu();

/// The value of the "Cpus_allowed_list:" line of a /proc/.../status text ("" when absent).
std::string parse_cpus_allowed_list(std::string_view status);

/// Every thread of this process, by tid, with where each may run and last ran. Threads that exit
/// while being read are skipped.
[[nodiscard]] Result<std::vector<ThreadCpu>> read_thread_cpu(
    const std::string& task_dir = "/proc/self/task");

}  // namespace tern
