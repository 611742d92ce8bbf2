// TerminalRawMode: puts a terminal in raw mode and puts it back (RAII, and from signal handlers).
#pragma once

#include <termios.h>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

/// Raw mode on a terminal for the lifetime of this object: no line editing, no echo, no CR/NL
/// translation, and (unless keep_signals) Ctrl-C/Ctrl-Z/Ctrl-\ go to the guest instead of
/// raising signals. At most one is active in the process at a time, so that
/// restore_terminal_from_signal_handler() knows what to restore. The fd must stay open while
/// the object lives. Move-only.
class TerminalRawMode {
 public:
  /// Saves the terminal's attributes and switches to raw mode. Fails if `fd` is not a terminal
  /// or another TerminalRawMode is active.
  [[nodiscard]] static Result<TerminalRawMode> enter(BorrowedFd fd, bool keep_signals = false);

  TerminalRawMode(TerminalRawMode&& o) noexcept;
  TerminalRawMode& operator=(TerminalRawMode&& o) noexcept;
  TerminalRawMode(const TerminalRawMode&) = delete;
  TerminalRawMode& operator=(const TerminalRawMode&) = delete;
  ~TerminalRawMode() { restore(); }

  /// Restores the saved attributes now (idempotent).
  void restore();
  [[nodiscard]] bool active() const { return fd_ >= 0; }

 private:
  explicit TerminalRawMode(int fd) : fd_(fd) {}
  int fd_ = -1;
};

/// Restores the terminal of the active TerminalRawMode, if any. Async-signal-safe (only
/// tcsetattr), for the VMM's fatal-signal handlers; the RAII object's later restore() is
/// harmless.
void restore_terminal_from_signal_handler();

}  // namespace tern
