// tern: a KVM virtual machine monitor. Entry point: parses the command line and dispatches.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "base/log.h"
#include "vmm/exit_status.h"
#include "vmm/run_command.h"

int main(int argc, char** argv) {
  CLI::App app{"tern: a KVM virtual machine monitor"};
  app.set_version_flag("--version", std::string("tern ") + TERN_VERSION);
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  tern::RunOptions run_opts;
  CLI::App* run = tern::add_run_command(app, run_opts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tern: %s\nRun 'tern --help' or 'tern run --help' for usage.\n", e.what());
    return tern::kExitError;
  }
  // The guest console owns stdout: tern's own messages go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tern"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("tern: [%l] %v");
  try {
    if (run->parsed()) return tern::run_vm(run_opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tern: internal error: %s\n", e.what());
    return tern::kExitError;
  }
  return tern::kExitError;
}
