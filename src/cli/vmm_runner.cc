#include "cli/vmm_runner.h"

#include <cstdio>

#include "api/api_server.h"
#include "vmm/config_file.h"
#include "vmm/exit_status.h"
#include "vmm/signal_watcher.h"

namespace tern {

int run_vmm(ControlLoop& loop, EventLog& events, const std::string& api_sock, bool start_now,
            const std::function<tl::expected<void, StartFailure>()>& first) {
  // Block the stop signals before any thread exists, so they reach the watcher only.
  CommandQueue& q = loop.queue();
  auto watcher = SignalWatcher::start([&q](int s) { q.push(cmd::Signal{s}); });
  if (!watcher) {
    std::fprintf(stderr, "tern: %s\n", watcher.error().message().c_str());
    return kExitError;
  }
  std::unique_ptr<ApiServer> server;
  if (!api_sock.empty()) {
    auto s = ApiServer::start(
        api_sock,
        [&q](ApiRequest r, std::function<void(ApiResponse)> reply) {
          q.push(cmd::Api{std::move(r), std::move(reply)});
        },
        events);
    if (!s) {
      std::fprintf(stderr, "tern: %s\n", s.error().message().c_str());
      return kExitError;
    }
    server = std::move(*s);
  }
  if (start_now || first) {
    auto ok = first ? first() : loop.start();
    if (!ok) {
      std::fprintf(stderr, "tern: %s\n", ok.error().error.message().c_str());
      return ok.error().exit_status;
    }
  }
  int status = loop.run();
  // Let event streams deliver the final events before the socket goes away.
  if (server) server->shutdown(std::chrono::seconds(1));
  return status;
}

int run_vmm_command(const VmmOptions& o) {
  EventLog events;
  auto loop = ControlLoop::create(create_vm_machine, events, create_restored_machine);
  if (!loop) {
    std::fprintf(stderr, "tern: %s\n", loop.error().message().c_str());
    return kExitError;
  }
  if (!o.config_file.empty()) {
    auto cfg = read_config_file(o.config_file);
    if (!cfg) {
      std::fprintf(stderr, "tern: %s\n", cfg.error().message().c_str());
      return kExitError;
    }
    (*loop)->configure(cfg->resources());
    // Errors name the file's fields, as its parse errors do, not the `tern run` options.
    ControlLoop& l = **loop;
    return run_vmm(l, events, o.api_sock, false, [&]() -> tl::expected<void, StartFailure> {
      auto ok = l.start();
      if (!ok) {
        Error e = with_api_field_names(ok.error().error);
        if (e.op != ok.error().error.op) e.op = "--config-file " + o.config_file + ": " + e.op;
        return tl::unexpected(StartFailure{ok.error().exit_status, std::move(e)});
      }
      return {};
    });
  }
  return run_vmm(**loop, events, o.api_sock, /*start_now=*/false);
}

}  // namespace tern
