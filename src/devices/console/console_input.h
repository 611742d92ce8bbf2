// ConsoleInput: a thread that reads the host's stdin (terminal, pipe or file) into the guest.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "base/fd.h"
#include "base/result.h"
#include "devices/console/input_sink.h"
#include "devices/console/terminal_raw_mode.h"

namespace tern {

struct ConsoleInputOptions {
  bool raw_terminal = true;   ///< Put a terminal in raw mode while reading it.
  bool keep_signals = false;  ///< In raw mode, keep Ctrl-C etc. as host signals.
};

/// Reads `in` on its own thread and feeds an InputSink (the UART).
///
/// Backpressure instead of loss: it reads only as many bytes as the sink has room for, and
/// while the sink is full it waits (polling every 10 ms) without reading. EOF or a read error
/// simply ends input. A terminal is put in raw mode for the object's lifetime. stop() (or
/// destruction) ends the thread promptly via an eventfd, without waiting for a keypress.
class ConsoleInput {
 public:
  /// Starts reading `in` (which must stay open while this object lives) into `sink` (which
  /// must outlive this object). Fails if `in` is not an open fd or raw mode cannot be set.
  [[nodiscard]] static Result<std::unique_ptr<ConsoleInput>> create(
      BorrowedFd in, InputSink& sink, ConsoleInputOptions options = {});

  ConsoleInput(const ConsoleInput&) = delete;
  ConsoleInput& operator=(const ConsoleInput&) = delete;
  /// Stops and joins the reader, then restores the terminal.
  ~ConsoleInput();

  /// Asks the reader thread to exit and waits for it (prompt: it is woken by an eventfd).
  void stop();
  /// True once the reader has exited (EOF, error or stop()).
  [[nodiscard]] bool finished() const { return finished_.load(); }
  [[nodiscard]] uint64_t bytes_read() const { return bytes_read_.load(); }
  [[nodiscard]] bool is_terminal() const { return raw_mode_.has_value(); }

 private:
  ConsoleInput(BorrowedFd in, InputSink& sink, UniqueFd stop_fd,
               std::optional<TerminalRawMode> raw_mode);
  void run();

  const int in_fd_;
  InputSink& sink_;
  UniqueFd stop_fd_;  // eventfd; readable once stop() is called
  std::optional<TerminalRawMode> raw_mode_;
  std::atomic<bool> finished_{false};
  std::atomic<uint64_t> bytes_read_{0};
  std::thread reader_;  // last: started after everything above is initialised
};

}  // namespace tern
