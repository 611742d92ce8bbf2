// VhostUserBlk: create()'s handshake and config read; the queues go to the BackendSession.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "vhost_user/frontend/blk_features.h"
#include "vhost_user/frontend/vhost_user_blk_device.h"
#include "virtio/block/virtio_blk_spec.h"

namespace tern {

namespace {

using vhost_user::BackendSession;

// The pause/resume face of the session for the device base; destroying it is the device's
// reset (the vrings stop, the activation is forgotten; the connection stays).
class VhostUserQueues final : public virtio::ExternalQueues {
 public:
  explicit VhostUserQueues(BackendSession& s) : s_(s) {}
  ~VhostUserQueues() override { s_.deactivate(); }
  std::vector<std::pair<uint16_t, QueuePosition>> pause() override { return s_.pause(); }
  Result<void> resume() override { return s_.resume(); }

 private:
  BackendSession& s_;
};

// The fields of a vhost-user disk that are the back-end's must be left at their defaults.
Result<void> validate(const DiskConfig& c) {
  const std::string field = "--disk vhost-user=" + c.vhost_user_socket;
  if (c.vhost_user_socket.empty()) return fail("--disk vhost-user", "missing socket path");
  if (!c.path.empty()) return fail(field, "path= is the back-end's (give one or the other)");
  if (c.cache != CacheMode::kWriteback) return fail(field, "cache= is the back-end's");
  if (c.read_only) return fail(field, "readonly= is the back-end's");
  if (!c.serial.empty()) return fail(field, "serial= is the back-end's");
  if (c.engine != IoEngineKind::kIoUring) return fail(field, "engine= is the back-end's");
  return validate_disk_config(c);  // queues, queue_size (it knows vhost-user disks now)
}

}  // namespace

Result<std::shared_ptr<VhostUserBlk>> VhostUserBlk::create(const DiskConfig& config,
                                                           std::string name,
                                                           vhost_user::SessionOptions options) {
  TRY(validate(config));
  const std::string what = "vhost-user " + config.vhost_user_socket;
  ASSIGN_OR_RETURN(
      vhost_user::FrontendClient client,
      vhost_user::FrontendClient::connect(config.vhost_user_socket, options.reply_timeout));
  ASSIGN_OR_RETURN(vhost_user::Negotiated n, vhost_user::negotiate(client, config.queues));
  ASSIGN_OR_RETURN(uint64_t features,
                   vhost_user::blk_guest_features(n.features, config.queues, what));
  if (!client.has_protocol_feature(vhost_user::VHOST_USER_PROTOCOL_F_CONFIG))
    return fail(what,
                "the back-end does not offer VHOST_USER_PROTOCOL_F_CONFIG (tern reads the "
                "virtio-blk config space with GET_CONFIG)");
  // Offset 0 of the device config space (Cloud Hypervisor #7615 sent the PCI capability offset).
  auto config_space = client.get_config(vhost_user::kBlkConfigBytes);
  if (!config_space)
    return fail(what, fmt::format("GET_CONFIG of the {}-byte virtio-blk config space failed (a "
                                  "reply of size 0 is the back-end's refusal): {}",
                                  vhost_user::kBlkConfigBytes, config_space.error().message()));
  std::vector<uint8_t> patched = vhost_user::blk_patch_config(*config_space, config.queues);
  ASSIGN_OR_RETURN(
      std::unique_ptr<BackendSession> session,
      BackendSession::start(std::move(client), n, name, config.queues, config.queue_size, options));
  return std::shared_ptr<VhostUserBlk>(
      new VhostUserBlk(std::move(name), features, config, std::move(patched), std::move(session)));
}

VhostUserBlk::VhostUserBlk(std::string name, uint64_t features, const DiskConfig& config,
                           std::vector<uint8_t> config_space,
                           std::unique_ptr<BackendSession> session)
    : VirtioDeviceBase(virtio::VIRTIO_ID_BLOCK, std::move(name), features, config.queues,
                       config.queue_size),
      config_space_(std::move(config_space)),
      session_(std::move(session)) {}

// The session must outlive the external queues (VhostUserQueues refers to it).
VhostUserBlk::~VhostUserBlk() {
  reset();
}

void VhostUserBlk::read_config(uint64_t offset, std::span<uint8_t> data) {
  std::fill(data.begin(), data.end(), 0);
  if (offset >= config_space_.size()) return;
  size_t n = std::min<uint64_t>(data.size(), config_space_.size() - offset);
  std::memcpy(data.data(), config_space_.data() + offset, n);
}

Result<std::unique_ptr<virtio::QueueHandler>> VhostUserBlk::make_queue_handler(
    uint16_t index, const VirtqueueConfig&, uint64_t) {
  return fail(std::string(name()),
              fmt::format("queue {}: served by the vhost-user back-end", index));
}

Result<std::unique_ptr<virtio::ExternalQueues>> VhostUserBlk::start_external(
    const GuestMemory& mem, uint64_t acked, std::vector<virtio::ExternalQueue> queues,
    std::shared_ptr<VirtioInterrupt> interrupt) {
  TRY(session_->activate(mem, acked, std::move(queues), std::move(interrupt)));
  return std::unique_ptr<virtio::ExternalQueues>(std::make_unique<VhostUserQueues>(*session_));
}

void VhostUserBlk::device_counters(std::vector<std::pair<std::string, uint64_t>>& out) const {
  session_->counters(out);
}

Result<std::shared_ptr<virtio::VirtioDeviceBase>> make_vhost_user_blk(const DiskConfig& config,
                                                                      std::string name) {
  ASSIGN_OR_RETURN(auto dev, VhostUserBlk::create(config, std::move(name), {}));
  return std::shared_ptr<virtio::VirtioDeviceBase>(std::move(dev));
}

}  // namespace tern
