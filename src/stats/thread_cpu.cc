#include "stats/thread_cpu.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <memory>

#include "base/fd.h"

namespace tern {

namespace {

// /proc files report st_size 0, so base/read_file() cannot read them: read until EOF.
std::optional<std::string> read_proc_file(const std::string& path) {
  auto fd = open_file(path, O_RDONLY | O_CLOEXEC);
  if (!fd) return std::nullopt;
  std::string out;
  char buf[1024];
  for (;;) {
    ssize_t n = retry_eintr([&] { return ::read(fd->get(), buf, sizeof buf); });
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 65536) return std::nullopt;
  }
  return out;
}

}  // namespace

std::optional<ThreadCpu> parse_task_stat(std::string_view line, uint64_t ns_per_tick) {
  // "tid (comm) state ppid ...": comm may hold spaces and parentheses, so it ends at the last ')'.
  size_t open = line.find('(');
  size_t close = line.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  ThreadCpu t;
  auto tid_text = line.substr(0, open);
  while (!tid_text.empty() && tid_text.back() == ' ') tid_text.remove_suffix(1);
  if (std::from_chars(tid_text.data(), tid_text.data() + tid_text.size(), t.tid).ec != std::errc())
    return std::nullopt;
  t.name = std::string(line.substr(open + 1, close - open - 1));
  // Fields after comm, numbered as in proc(5): 3 state, ..., 14 utime, 15 stime, ..., 43
  // guest_time.
  std::vector<std::string_view> f;
  std::string_view rest = line.substr(close + 1);
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\n')) ++i;
    size_t j = i;
    while (j < rest.size() && rest[j] != ' ' && rest[j] != '\n') ++j;
    if (j > i) f.push_back(rest.substr(i, j - i));
    i = j;
  }
  auto field = [&](size_t n, uint64_t& out) {
    size_t k = n - 3;  // f[0] is field 3
    if (k >= f.size()) return false;
    return std::from_chars(f[k].data(), f[k].data() + f[k].size(), out).ec == std::errc();
  };
  uint64_t ut = 0, st = 0, gt = 0;
  if (!field(14, ut) || !field(15, st) || !field(43, gt)) return std::nullopt;
  if (uint64_t cpu = 0; field(39, cpu)) t.last_cpu = static_cast<int>(cpu);
  t.user_ns = ut * ns_per_tick;
  t.system_ns = st * ns_per_tick;
  t.guest_ns = gt * ns_per_tick;
  return t;
}

namespace {
uint64_t ns_per_tick() {
  long hz = ::sysconf(_SC_CLK_TCK);
  return hz > 0 ? 1'000'000'000u / static_cast<uint64_t>(hz) : 10'000'000u;
}
}  // namespace

std::string parse_cpus_allowed_list(std::string_view status) {
  constexpr std::string_view kKey = "Cpus_allowed_list:";
  size_t at = status.find(kKey);
  if (at == std::string_view::npos || (at > 0 && status[at - 1] != '\n')) return "";
  size_t b = status.find_first_not_of(" \t", at + kKey.size());
  if (b == std::string_view::npos) return "";
  size_t e = status.find('\n', b);
  return std::string(status.substr(b, e == std::string_view::npos ? status.npos : e - b));
}

Result<ThreadCpu> read_process_cpu() {
  auto text = read_proc_file("/proc/self/stat");
  if (!text) return fail("read", "/proc/self/stat");
  auto t = parse_task_stat(*text, ns_per_tick());
  if (!t) return fail("parse", "/proc/self/stat");
  return *t;
}

Result<std::vector<ThreadCpu>> read_thread_cpu(const std::string& task_dir) {
  const uint64_t tick_ns = ns_per_tick();
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(task_dir.c_str()), ::closedir);
  if (!dir) return fail_errno("opendir", task_dir);
  std::vector<ThreadCpu> out;
  while (dirent* e = ::readdir(dir.get())) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    auto text = read_proc_file(task_dir + "/" + e->d_name + "/stat");
    if (!text) continue;  // the thread exited meanwhile
    auto t = parse_task_stat(*text, tick_ns);
    if (!t) continue;
    if (auto status = read_proc_file(task_dir + "/" + e->d_name + "/status"))
      t->cpus_allowed = parse_cpus_allowed_list(*status);
    out.push_back(std::move(*t));
  }
  std::sort(out.begin(), out.end(),
            [](const ThreadCpu& a, const ThreadCpu& b) { return a.tid < b.tid; });
  return out;
}

}  // namespace tern
