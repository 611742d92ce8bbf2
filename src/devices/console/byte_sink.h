// ByteSink: where a device sends the bytes it transmits (e.g. a UART's THR -> ConsoleOutput).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

namespace tern {

/// Receives transmitted bytes. Called from vCPU threads with the device lock held: it must not
/// block (ConsoleOutput::write queues or drops) and must not call back into the device.
using ByteSink = std::function<void(std::span<const uint8_t> bytes)>;

}  // namespace tern
