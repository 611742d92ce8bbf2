// eventually(): polls a condition in a test until it holds or a deadline passes — for state no
// event announces (a counter another thread bumps). Yields between polls; never a fixed sleep.
#pragma once

#include <chrono>
#include <thread>

namespace tern::testing {

/// Polls `pred` until it returns true (then true) or `timeout` passes (then false).
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace tern::testing
