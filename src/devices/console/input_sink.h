// InputSink: a device that accepts bytes from the host side (e.g. a UART's receiver).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tern {

/// The receiving end of a console: ConsoleInput feeds it. Both calls are thread-safe and
/// never block.
class InputSink {
 public:
  virtual ~InputSink() = default;
  /// How many bytes enqueue_input() would accept right now (0 while the receiver is full or
  /// disconnected, e.g. a UART in loopback mode).
  [[nodiscard]] virtual size_t input_space() = 0;
  /// Queues bytes for the guest; returns how many were accepted. The rest are dropped and
  /// counted by the device.
  virtual size_t enqueue_input(std::span<const uint8_t> bytes) = 0;
};

}  // namespace tern
