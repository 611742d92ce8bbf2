#include "cli/stat_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "api/api_client.h"
#include "stats/stats_table.h"
#include "vmm/exit_status.h"

namespace tern {

namespace {

Result<nlohmann::json> fetch(const std::string& sock) {
  ASSIGN_OR_RETURN(std::string body, api_get(sock, "/tern/stats", std::chrono::seconds(10)));
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return fail("GET /tern/stats", sock + ": the reply is not a JSON object");
  if (!j.contains("timestamp_ns"))
    return fail("GET /tern/stats", sock + ": no VM statistics yet (is a VM running?)");
  return j;
}

}  // namespace

CLI::App* add_stat_command(CLI::App& app, StatOptions& o) {
  CLI::App* s = app.add_subcommand(
      "stat", "Show a running tern's exits, device accesses, KVM counters and CPU per thread");
  s->add_option("--api-sock", o.api_sock, "The control API socket of the running tern")->required();
  s->add_option("--interval", o.interval_s, "Seconds between refreshes (rates are per second)")
      ->capture_default_str();
  s->add_flag("--once", o.once, "Measure one interval, print it and exit");
  s->add_flag("--json", o.json, "Print rates and totals as JSON instead of a table");
  s->add_option("--rows", o.rows, "Rows per section in the table (0: all)")->capture_default_str();
  return s;
}

int run_stat(const StatOptions& o) {
  if (!(o.interval_s >= 0.05 && o.interval_s <= 3600)) {
    std::fprintf(stderr, "tern: --interval: %g is outside 0.05 .. 3600 seconds\n", o.interval_s);
    return kExitError;
  }
  auto prev = fetch(o.api_sock);
  if (!prev) {
    std::fprintf(stderr, "tern: %s\n", prev.error().message().c_str());
    return kExitError;
  }
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  const auto interval = std::chrono::duration<double>(o.interval_s);
  for (;;) {
    std::this_thread::sleep_for(interval);
    auto cur = fetch(o.api_sock);
    if (!cur) {
      // The VM went away between refreshes: a normal end for a live view, an error for --once.
      std::fprintf(stderr, "tern: %s\n", cur.error().message().c_str());
      return o.once ? kExitError : 0;
    }
    nlohmann::json rates = compute_rates(*prev, *cur);
    if (o.json) {
      rates["stats"] = *cur;
      std::printf("%s\n",
                  rates.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      if (tty && !o.once) std::fputs("\033[H\033[2J", stdout);  // clear and home: a live screen
      std::fputs(render_rates_table(rates, o.rows).c_str(), stdout);
    }
    std::fflush(stdout);
    if (o.once) return 0;
    prev = std::move(cur);
  }
}

}  // namespace tern
