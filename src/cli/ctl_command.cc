#include "cli/ctl_command.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "api/api_client.h"

namespace tern {

namespace {

struct Verb {
  const char* method;
  const char* target;
  const char* body;
  const char* help;
};

const std::map<std::string, Verb>& verbs() {
  static const std::map<std::string, Verb> v = {
      {"info", {"GET", "/", "", "instance state (GET /)"}},
      {"config", {"GET", "/vm/config", "", "the full VM configuration (GET /vm/config)"}},
      {"pause", {"PATCH", "/vm", R"({"state":"Paused"})", "pause the vCPUs"}},
      {"resume", {"PATCH", "/vm", R"({"state":"Resumed"})", "resume the vCPUs"}},
      {"ctrl-alt-del",
       {"PUT", "/actions", R"({"action_type":"SendCtrlAltDel"})",
        "type Ctrl+Alt+Del in the guest"}},
      {"power-off", {"PUT", "/tern/power-off", "", "hard stop: tern exits"}},
      {"stats", {"GET", "/tern/stats", "", "exit statistics (JSON)"}},
      {"metrics", {"GET", "/tern/metrics", "", "Prometheus metrics"}},
      {"events", {"GET", "/tern/events", "", "follow lifecycle events (JSON lines)"}},
      {"kernel-exits-on",
       {"PUT", "/tern/kernel-exits", R"({"enabled":true})",
        "in-kernel exit accounting on (PUT /tern/kernel-exits; needs CAP_BPF + CAP_PERFMON, "
        "tracefs, kernel BTF)"}},
      {"kernel-exits-off",
       {"PUT", "/tern/kernel-exits", R"({"enabled":false})", "in-kernel exit accounting off"}},
  };
  return v;
}

}  // namespace

CLI::App* add_ctl_command(CLI::App& app, CtlOptions& o) {
  std::string help = "Operate a running tern through its API socket. Verbs:";
  for (const auto& [name, v] : verbs()) help += std::string("\n  ") + name + ": " + v.help;
  CLI::App* ctl = app.add_subcommand("ctl", help);
  ctl->add_option("--api-sock", o.api_sock, "tern's API socket")->required();
  std::vector<std::string> names;
  for (const auto& [name, v] : verbs()) names.push_back(name);
  ctl->add_option("verb", o.verb, "what to do")->required()->check(CLI::IsMember(names));
  return ctl;
}

int run_ctl(const CtlOptions& o) {
  const Verb& v = verbs().at(o.verb);
  if (o.verb == "events") {
    auto r = api_read_events(o.api_sock, [](const std::string& line) {
      std::cout << line << std::endl;
      return true;
    });
    if (!r) {
      std::fprintf(stderr, "tern ctl: %s\n", r.error().message().c_str());
      return 1;
    }
    return 0;
  }
  auto r = api_request(o.api_sock, v.method, v.target, v.body);
  if (!r) {
    std::fprintf(stderr, "tern ctl: %s\n", r.error().message().c_str());
    return 1;
  }
  if (r->status >= 400) {
    std::string msg = r->body;
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_object() && j.contains("fault_message") && j["fault_message"].is_string())
      msg = j["fault_message"].get<std::string>();
    // A fault message that names the request already ("PUT /tern/kernel-exits: ...") is not
    // prefixed with it a second time.
    const std::string request = std::string(v.method) + " " + v.target + ": ";
    if (msg.starts_with(request)) msg.erase(0, request.size());
    std::fprintf(stderr, "tern ctl: %s %s: %d: %s\n", v.method, v.target, r->status, msg.c_str());
    return 1;
  }
  if (!r->body.empty()) {
    std::cout << r->body;
    if (r->body.back() != '\n') std::cout << '\n';
  }
  return 0;
}

}  // namespace tern
