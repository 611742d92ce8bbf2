#include "vhost_user/backend/backend_stats.h"

#include <fmt/format.h>

namespace tern::vhost_user {

std::string BackendStats::summary() const {
  auto g = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  std::string s = fmt::format(
      "connections {} protocol_errors {} unsupported {} failed_requests {}; reads {} writes {} "
      "flushes {} discards {} write_zeroes {} bytes_read {} bytes_written {} ioerr {} unsupp {} "
      "malformed_chains {}",
      g(connections), g(protocol_errors), g(unsupported), g(failed_requests), g(blk.reads),
      g(blk.writes), g(blk.flushes), g(blk.discards), g(blk.write_zeroes), g(blk.bytes_read),
      g(blk.bytes_written), g(blk.ioerr), g(blk.unsupp), g(blk.malformed_chains));
  for (uint16_t q = 0; q < num_queues; ++q) {
    const auto& c = queue[q];
    s += fmt::format("\n  queue {}: requests {} bytes {} errors {} kicks {} interrupts {} "
                     "malformed {} needs_reset {}",
                     q, g(c.requests), g(c.bytes), g(c.errors), g(c.kicks), g(c.interrupts),
                     g(c.malformed), g(c.needs_reset));
  }
  return s;
}

}  // namespace tern::vhost_user
