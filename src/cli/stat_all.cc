#include "cli/stat_all.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "stats/farm_view.h"
#include "vmm/exit_status.h"

namespace tern {

namespace {

std::string vm_name(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  for (const char* suffix : {".sock", ".socket"}) {
    const size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) name.resize(name.size() - n);
  }
  return name;
}

// One snapshot of every VM, fetched in parallel by at most kMaxInFlight threads (a slow VM does
// not delay the others' lines by more than its own timeout while VMs are fewer than that): socket
// → stats or error. The cap bounds threads, memory and file descriptors (each fetch holds a
// socket and an io_context's epoll, eventfd and timerfd): one thread per VM made a farm of a
// thousand VMs fail with EMFILE under the usual limit of 1024 descriptors.
constexpr size_t kMaxInFlight = 32;

std::map<std::string, Result<nlohmann::json>> fetch_all(const FarmTargets& t) {
  std::vector<std::optional<Result<nlohmann::json>>> got(t.vms.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < t.vms.size();) got[i] = fetch_stats(t.vms[i].second);
  };
  std::vector<std::thread> workers;
  for (size_t k = 0; k < std::min(kMaxInFlight, t.vms.size()); ++k) workers.emplace_back(work);
  for (auto& w : workers) w.join();
  std::map<std::string, Result<nlohmann::json>> out;
  for (size_t i = 0; i < t.vms.size(); ++i) out.emplace(t.vms[i].second, std::move(*got[i]));
  return out;
}

}  // namespace

FarmTargets find_farm_targets(const std::vector<std::string>& socks,
                              const std::vector<std::string>& dirs) {
  FarmTargets t;
  std::set<std::string> seen;
  auto add = [&](const std::string& path) {
    if (seen.insert(path).second) t.vms.emplace_back(vm_name(path), path);
  };
  for (const std::string& s : socks) add(s);
  for (const std::string& d : dirs) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(d.c_str()), ::closedir);
    if (!dir) {
      t.errors.emplace_back(d, std::string("--sock-dir: ") + std::strerror(errno));
      continue;
    }
    std::vector<std::string> found;
    while (dirent* e = ::readdir(dir.get())) {
      const std::string path = d + (d.ends_with('/') ? "" : "/") + e->d_name;
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) found.push_back(path);
    }
    std::sort(found.begin(), found.end());
    for (const std::string& p : found) add(p);
  }
  return t;
}

int run_stat_all(const StatOptions& o) {
  if (o.api_socks.empty() && o.sock_dirs.empty()) {
    std::fprintf(stderr, "tern: --all: give the VMs' sockets (--api-sock, repeatable) or "
                         "--sock-dir DIR\n");
    return kExitError;
  }
  FarmTargets targets = find_farm_targets(o.api_socks, o.sock_dirs);
  auto prev = fetch_all(targets);
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.interval_s));
    targets = find_farm_targets(o.api_socks, o.sock_dirs);  // VMs that came or went
    auto cur = fetch_all(targets);
    std::vector<FarmLine> lines;
    size_t answered = 0;
    for (const auto& [name, sock] : targets.vms) {
      FarmLine l{name, std::nullopt, ""};
      const auto& now = cur.at(sock);
      auto before = prev.find(sock);
      if (!now) {
        l.error = now.error().message();
      } else if (before == prev.end() || !before->second) {
        l.error = "no earlier snapshot yet (it appeared this interval)";
      } else {
        try {
          l.row = farm_row(*before->second, *now);
          ++answered;
        } catch (const nlohmann::json::exception& e) {
          l.error = std::string("GET /tern/stats: a reply tern stat cannot read (") + e.what() + ")";
        }
      }
      lines.push_back(std::move(l));
    }
    for (const auto& [name, why] : targets.errors) lines.push_back({name, std::nullopt, why});
    if (lines.empty()) std::fprintf(stderr, "tern: --sock-dir: no tern API socket found\n");
    std::string screen;
    if (o.json) {
      screen = farm_json(lines).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    } else {
      if (tty && !o.once) screen = "\033[H\033[2J";
      screen += render_farm(lines);
    }
    std::fputs(screen.c_str(), stdout);
    std::fflush(stdout);
    if (o.once) return answered > 0 ? 0 : kExitError;
    prev = std::move(cur);
  }
}

}  // namespace tern
