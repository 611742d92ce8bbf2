// FrontendClient: the front-end side of the vhost-user protocol over one Channel: one method per
// request tern sends, each waiting (bounded) for its reply and parsing it with
// vhost_user_message.h. With REPLY_ACK negotiated, requests that have no reply of their own are
// sent with NEED_REPLY and their ack is checked, so a back-end's failure shows at the request
// that failed. Errors name the socket and the request ("vhost-user /run/blk.sock: GET_CONFIG:
// no reply in 5000 ms"). After any error the connection is unusable (the caller drops it).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "vhost_user/vhost_user_channel.h"

namespace tern::vhost_user {

/// How long the front-end waits for one reply. A back-end that does not answer in this time is
/// treated as failed (at start: tern refuses to start, naming the socket and the request).
inline constexpr std::chrono::milliseconds kReplyTimeout{5000};

/// See the file comment. Not thread-safe.
class FrontendClient {
 public:
  /// Connects to `socket_path` (no message is sent yet).
  [[nodiscard]] static Result<FrontendClient> connect(const std::string& socket_path,
                                                      std::chrono::milliseconds reply_timeout =
                                                          kReplyTimeout);
  /// Wraps a connected channel (tests).
  FrontendClient(Channel channel, std::string socket_path,
                 std::chrono::milliseconds reply_timeout = kReplyTimeout);

  [[nodiscard]] Result<uint64_t> get_features();
  [[nodiscard]] Result<void> set_features(uint64_t features);
  [[nodiscard]] Result<uint64_t> get_protocol_features();
  /// Also remembers `features` (REPLY_ACK use; has_protocol_feature()).
  [[nodiscard]] Result<void> set_protocol_features(uint64_t features);
  [[nodiscard]] Result<uint64_t> get_queue_num();
  [[nodiscard]] Result<void> set_owner();
  /// GET_CONFIG from offset 0 for `size` bytes (≤ VHOST_USER_MAX_CONFIG_SIZE).
  [[nodiscard]] Result<std::vector<uint8_t>> get_config(uint32_t size);
  [[nodiscard]] Result<uint64_t> get_max_mem_slots();
  /// SET_MEM_TABLE: regions (≤ 8) with one fd each, same order.
  [[nodiscard]] Result<void> set_mem_table(std::span<const VhostUserMemoryRegion> regions,
                                           std::span<const int> fds);
  /// ADD_MEM_REG (CONFIGURE_MEM_SLOTS): one region and its fd.
  [[nodiscard]] Result<void> add_mem_reg(const VhostUserMemoryRegion& region, int fd);
  /// GET_INFLIGHT_FD for `num_queues` queues of `queue_size`; the reply's mmap_size is bounded
  /// by what that many split queues need (plus a page).
  [[nodiscard]] Result<InflightReply> get_inflight_fd(uint16_t num_queues, uint16_t queue_size);
  [[nodiscard]] Result<void> set_inflight_fd(const VhostUserInflight& info, int fd);
  [[nodiscard]] Result<void> set_vring_num(uint32_t index, uint32_t num);
  [[nodiscard]] Result<void> set_vring_addr(const VhostVringAddr& addr);
  [[nodiscard]] Result<void> set_vring_base(uint32_t index, uint32_t base);
  /// GET_VRING_BASE: stops the vring (spec) and returns its next available index.
  [[nodiscard]] Result<uint32_t> get_vring_base(uint32_t index);
  /// `fd` < 0 sends VHOST_USER_VRING_NOFD_MASK.
  [[nodiscard]] Result<void> set_vring_kick(uint32_t index, int fd);
  [[nodiscard]] Result<void> set_vring_call(uint32_t index, int fd);
  [[nodiscard]] Result<void> set_vring_enable(uint32_t index, bool enable);
  /// RESET_DEVICE when negotiated, else RESET_OWNER.
  [[nodiscard]] Result<void> reset_device();

  [[nodiscard]] bool has_protocol_feature(unsigned bit) const {
    return (protocol_features_ >> bit) & 1;
  }
  [[nodiscard]] const std::string& socket_path() const { return path_; }
  /// The socket: readable with EOF/HUP when the back-end went away (the device's monitor).
  [[nodiscard]] BorrowedFd fd() const { return channel_.fd(); }

 private:
  /// Sends a request without a reply of its own (NEED_REPLY + ack when REPLY_ACK is negotiated).
  Result<void> send_no_reply(uint32_t request, std::span<const uint8_t> body,
                             std::span<const int> fds);
  /// Sends a request and returns its reply, unparsed.
  Result<Message> send_with_reply(uint32_t request, std::span<const uint8_t> body);
  /// Names a parser's error after the socket; marks the connection broken on error.
  template <class T>
  Result<T> parsed(uint32_t request, Result<T> r);
  Result<uint64_t> get_u64(uint32_t request);
  Result<void> set_vring_fd(uint32_t request, uint32_t index, int fd);

  Channel channel_;
  std::string path_;
  std::chrono::milliseconds timeout_;
  uint64_t protocol_features_ = 0;
  bool broken_ = false;  ///< an exchange failed half-way: nothing more is sent
};

}  // namespace tern::vhost_user
