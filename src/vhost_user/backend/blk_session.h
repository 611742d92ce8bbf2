// BlkSession: the back-end's side of ONE vhost-user connection (spec "Front-end message types"):
// the negotiated features, the memory table, the inflight region and each vring's state, and a
// QueueWorker running a BlockQueueHandler for each started ring. BlkDisk is what outlives
// connections: the open image and the config space offered.
//
// Ring life cycle (spec "Ring states"): a ring starts once it has a size, addresses, a kick fd
// and memory, and — when VHOST_USER_F_PROTOCOL_FEATURES was negotiated — SET_VRING_ENABLE 1
// (without it, a ring is enabled from the start). GET_VRING_BASE stops it (drained: every chain
// taken is returned) and reports next_avail; SET_VRING_ENABLE 0 stops it too. A new memory table
// (SET_MEM_TABLE, ADD/REM_MEM_REG) stops the running rings, remaps and restarts them at their
// positions. Destroying the session stops every ring the same way and unmaps the memory.
//
// Not thread-safe: the serving thread calls handle() one request at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/log.h"
#include "block/disk_config.h"
#include "block/disk_image.h"
#include "vhost_user/backend/backend_memory.h"
#include "vhost_user/backend/backend_stats.h"
#include "vhost_user/backend/inflight.h"
#include "vhost_user/vhost_user_message.h"
#include "virtio/block/virtio_blk_spec.h"
#include "virtio/queue_worker.h"

namespace tern::vhost_user {

/// The seg_max the back-end advertises: min(queue_size, 128) - 2. The front-end reads the config
/// space before it picks the ring size (SET_VRING_NUM), and a driver without INDIRECT_DESC needs
/// seg_max + 2 <= ring; 128 is QEMU's default vhost-user-blk-pci queue-size and the ring
/// qemu-storage-daemon sizes its seg_max (126) for. `--disk queue_size` lowers it for a front-end
/// with a smaller ring.
[[nodiscard]] uint32_t backend_seg_max(uint16_t queue_size);

/// The disk served, across connections.
struct BlkDisk {
  DiskConfig config;
  DiskImage image;
  IoEngineKind engine = IoEngineKind::kIoUring;  ///< After the io_uring probe.
  virtio::VirtioBlkConfig config_space{};
  uint64_t features = 0;  ///< Virtio features offered (GET_FEATURES adds PROTOCOL_FEATURES).

  /// Validates `config` and opens the image (errors name the --disk field, as for `tern run`).
  [[nodiscard]] static Result<BlkDisk> open(const DiskConfig& config);
};

/// See the file comment.
class BlkSession {
 public:
  /// `disk`, `stats` and `log_limit` outlive the session.
  BlkSession(const BlkDisk& disk, BackendStats& stats, RateLimit& log_limit);
  ~BlkSession();
  BlkSession(const BlkSession&) = delete;
  BlkSession& operator=(const BlkSession&) = delete;

  /// What to send back: a reply or REPLY_ACK, with at most one fd (GET_INFLIGHT_FD's).
  struct Reply {
    Message msg;
    int fd = -1;
  };
  /// True for the requests this back-end implements (others: unsupported()).
  [[nodiscard]] static bool implements(uint32_t request);
  /// Executes one validated request. A request that fails (bad index, memory that cannot be
  /// mapped, ...) is counted and logged and answered with a failure status when the front-end
  /// asked for a REPLY_ACK. The error result is for a request the connection cannot survive.
  [[nodiscard]] Result<std::optional<Reply>> handle(Request req);
  /// An unsupported or unknown request: a failure ack when asked for one, else nothing.
  [[nodiscard]] std::optional<Reply> unsupported(uint32_t request, bool need_reply);

  /// Whether ring `index` has a running worker (tests).
  [[nodiscard]] bool running(uint16_t index) const;

 private:
  class CallInterrupt;
  struct Vring {
    uint16_t num = 0;
    bool addr_set = false;
    VhostVringAddr addr{};
    uint16_t base = 0;
    UniqueFd kick;
    bool enabled = false;
    std::shared_ptr<CallInterrupt> interrupt;
    std::unique_ptr<InflightQueue> inflight;     // outlives worker
    std::unique_ptr<virtio::QueueWorker> worker;
  };

  /// A request without a reply of its own: Ok or a failure (logged) for the REPLY_ACK.
  Result<void> execute(Request& req);
  Result<std::optional<Reply>> reply(const Request& req);
  Result<void> set_mem_table(Request& req);
  Result<Vring*> ring(uint32_t index);
  void try_start(uint16_t index);
  Result<void> start(uint16_t index);
  void stop(uint16_t index);
  void stop_all();
  void restart_all();
  [[nodiscard]] bool protocol_features_negotiated() const;

  const BlkDisk& disk_;
  BackendStats& stats_;
  RateLimit& log_limit_;
  uint64_t acked_features_ = 0;
  uint64_t protocol_features_ = 0;
  BackendMemory memory_;
  std::optional<InflightRegion> inflight_;
  std::vector<Vring> rings_;
};

}  // namespace tern::vhost_user
