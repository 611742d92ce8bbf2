// VuBlkTest: the front-end tests' fixture: a FakeBackend at a socket in a fresh directory,
// offering a typical qemu-storage-daemon feature set, short session timeouts, and helpers to
// create and activate a VhostUserBlk and read its named counters.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/temp_dir.h"
#include "vhost_user/frontend/testing/fake_backend.h"
#include "vhost_user/frontend/testing/shared_ram.h"
#include "vhost_user/frontend/vhost_user_blk_device.h"
#include "virtio/testing/signal_counting_interrupt.h"

namespace tern::vhost_user {

class VuBlkTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kCapacity = 2048;
  static constexpr uint64_t kGuestFeatures =
      virtio::feature(virtio::VIRTIO_F_VERSION_1) | virtio::feature(virtio::VIRTIO_F_EVENT_IDX) |
      virtio::feature(virtio::VIRTIO_BLK_F_FLUSH) | virtio::feature(virtio::VIRTIO_BLK_F_BLK_SIZE);

  VuBlkTest() {
    be.features = kGuestFeatures | virtio::feature(virtio::VIRTIO_BLK_F_MQ) |
                  (uint64_t{1} << VHOST_USER_F_PROTOCOL_FEATURES);
    be.protocol_features = kTernProtocolFeatures;
    be.queue_num = 4;
    be.config.capacity = kCapacity;
    be.config.blk_size = 4096;
    be.config.num_queues = 4;
  }

  Result<std::shared_ptr<VhostUserBlk>> create(uint16_t queues) {
    DiskConfig c;
    c.vhost_user_socket = sock;
    c.queues = queues;
    c.queue_size = 256;
    return VhostUserBlk::create(c, "virtio-blk1", opts);
  }
  static Result<void> activate(VhostUserBlk& dev, const testing::SharedRam& ram, uint16_t queues,
                               uint64_t acked, std::shared_ptr<VirtioInterrupt> irq) {
    std::vector<VirtqueueConfig> q;
    for (uint16_t i = 0; i < queues; ++i) q.push_back(testing::SharedRam::queue(i));
    return dev.activate(ram.mem(), acked, q, testing::SharedRam::kicks(queues), std::move(irq));
  }
  static uint64_t counter(const VhostUserBlk& dev, const std::string& name) {
    for (const auto& [n, v] : dev.counters().counters)
      if (n == name) return v;
    ADD_FAILURE() << "no counter " << name;
    return ~uint64_t{0};
  }

  tern::testing::TempDir dir{"tern-vu-front"};
  std::string sock = dir.path() + "/blk.sock";
  testing::FakeBackend be{sock};
  SessionOptions opts{std::chrono::milliseconds(5000), std::chrono::milliseconds(10),
                      std::chrono::milliseconds(50)};
};

}  // namespace tern::vhost_user
