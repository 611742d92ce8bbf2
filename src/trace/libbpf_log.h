// libbpf's own messages: never printed to the terminal; routed to tern's debug log, and captured
// while a KernelExitTrace starts so that a failure can quote the line that explains it.
#pragma once

#include <string>
#include <vector>

namespace tern {

/// Captures libbpf's messages for as long as it lives (one capture at a time: starts are
/// serialized by it). Installs tern's libbpf print callback on first use.
class LibbpfLogCapture {
 public:
  LibbpfLogCapture();
  ~LibbpfLogCapture();
  LibbpfLogCapture(const LibbpfLogCapture&) = delete;
  LibbpfLogCapture& operator=(const LibbpfLogCapture&) = delete;

  /// The last lines (at most `n`) of the kernel's verifier log that libbpf printed, joined with
  /// "; "; "" when no program load failed.
  [[nodiscard]] std::string verifier_tail(size_t n) const;
  /// The last line libbpf printed that is not part of a verifier log, trimmed; "" when none.
  [[nodiscard]] std::string last_message() const;

 private:
  std::vector<std::string> lines_;
};

}  // namespace tern
