// Test fixture for VirtioBlock (unit tests only): a temporary image, a fake guest with one fake
// driver per queue, and helpers that build virtio-blk requests, kick, and wait for the used ring.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "virtio/block/virtio_block.h"
#include "virtio/block/virtio_blk_spec.h"
#include "virtio/testing/fake_virtqueue_driver.h"

namespace tern::testing {

class BlockDeviceTest : public ::testing::Test {
 protected:
  using Buf = FakeVirtqueueDriver::Buf;
  static constexpr uint16_t kQueueSize = 64;
  static constexpr uint64_t kHeaderGpa = 0x80000;
  static constexpr uint64_t kDataGpa = 0x90000;     // 256 KiB of data space
  static constexpr uint64_t kStatusGpa = 0x88000;

  struct Done {
    uint8_t status = 0xff;
    uint32_t used_len = 0;
    uint16_t id = 0;
  };

  void SetUp() override {
    char tmpl[] = "/tmp/tern-blk-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/disk.img";
  }
  void TearDown() override {
    if (dev_) dev_->reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  /// Writes an image of `size` bytes whose byte i is pattern(i).
  void make_image(uint64_t size) {
    std::vector<uint8_t> b(size);
    for (uint64_t i = 0; i < size; ++i) b[i] = pattern(i);
    std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(b.data()),
                                                 static_cast<std::streamsize>(size));
  }
  static uint8_t pattern(uint64_t i) { return static_cast<uint8_t>((i * 7 + i / 512) ^ 0x5a); }

  std::vector<uint8_t> file_bytes() {
    std::ifstream f(path_, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
  }
  /// True if the file still holds the original pattern at every byte, and has size `size`.
  bool image_unchanged(uint64_t size) {
    auto b = file_bytes();
    if (b.size() != size) return false;
    for (uint64_t i = 0; i < size; ++i)
      if (b[i] != pattern(i)) return false;
    return true;
  }

  DiskConfig config(uint16_t queues = 1) {
    DiskConfig c;
    c.path = path_;
    c.serial = "tern-serial-0001";
    c.queues = queues;
    c.queue_size = kQueueSize;
    return c;
  }

  /// Creates and activates the device, acking every offered feature. A previous device goes
  /// first: it holds the image's lock (DiskConfig::locking) until it is destroyed.
  void start(const DiskConfig& c) {
    dev_.reset();
    auto d = VirtioBlock::create(c);
    ASSERT_TRUE(d) << d.error().message();
    dev_ = *d;
    drivers_.clear();
    kicks_.clear();
    std::vector<VirtqueueConfig> qs;
    std::vector<UniqueFd> kicks;
    for (uint16_t i = 0; i < c.queues; ++i) {
      // A driver (re)initialising a queue starts from zeroed rings.
      (void)ram_.mem().write(0x1000 + 0x10000ull * i, std::vector<uint8_t>(0x10000, 0));
      drivers_.push_back(
          std::make_unique<FakeVirtqueueDriver>(ram_.mem(), 0x1000 + 0x10000ull * i, kQueueSize));
      qs.push_back(drivers_.back()->config());
      auto k = make_eventfd(0, 0);
      ASSERT_TRUE(k);
      kicks_.emplace_back(::dup(k->get()));
      kicks.push_back(std::move(*k));
    }
    auto r = dev_->activate(ram_.mem(), dev_->device_features(), std::move(qs), std::move(kicks),
                            irq_);
    ASSERT_TRUE(r) << r.error().message();
  }

  FakeVirtqueueDriver& drv(uint16_t q = 0) { return *drivers_[q]; }
  /// Like Linux's virtqueue_enable_cb(): with EVENT_IDX, ask for an interrupt on the next used
  /// buffer by setting used_event to the current used->idx.
  void arm(uint16_t q = 0) { drv(q).set_used_event(drv(q).used_idx()); }
  void kick(uint16_t q = 0) {
    uint64_t one = 1;
    ASSERT_EQ(::write(kicks_[q].get(), &one, sizeof one), 8);
  }
  /// Waits until queue `q`'s used->idx reaches `idx` (fails the test after the timeout).
  /// Re-arms used_event after every partial wake-up, as a driver does after consuming used
  /// buffers (write used_event, fence, re-check used->idx), so EVENT_IDX keeps interrupts coming.
  bool wait_used(uint16_t idx, uint16_t q = 0) {
    return irq_->wait_until([&] {
      for (;;) {
        uint16_t seen = drv(q).used_idx();
        if (seen == idx) return true;
        drv(q).set_used_event(seen);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (drv(q).used_idx() == seen) return false;
      }
    });
  }
  /// Makes `bufs` available on queue `q`, kicks, waits for it, returns status and used len.
  Done submit(const std::vector<Buf>& bufs, uint64_t status_gpa = kStatusGpa, uint16_t q = 0) {
    (void)ram_.mem().write_obj<uint8_t>(status_gpa, 0xff);
    uint16_t want = static_cast<uint16_t>(drv(q).used_idx() + 1);
    arm(q);
    drv(q).add_chain(bufs);
    kick(q);
    Done d;
    EXPECT_TRUE(wait_used(want, q)) << "request not completed";
    auto e = drv(q).used_elem(static_cast<uint16_t>(want - 1));
    d.used_len = e.len;
    d.id = static_cast<uint16_t>(e.id);
    d.status = ram_.mem().read_obj<uint8_t>(status_gpa).value();
    return d;
  }
  void put_header(uint32_t type, uint64_t sector, uint64_t gpa = kHeaderGpa) {
    (void)ram_.mem().write_obj(gpa, virtio::VirtioBlkOuthdr{type, 0, sector});
  }
  /// The usual three-descriptor request: header, data (if any), status.
  Done request(uint32_t type, uint64_t sector, uint32_t data_len, bool data_writable,
               uint64_t data_gpa = kDataGpa) {
    put_header(type, sector);
    std::vector<Buf> bufs{{kHeaderGpa, 16, false}};
    if (data_len > 0) bufs.push_back({data_gpa, data_len, data_writable});
    bufs.push_back({kStatusGpa, 1, true});
    return submit(bufs);
  }
  Done write_sectors(uint64_t sector, const std::vector<uint8_t>& data,
                     uint64_t data_gpa = kDataGpa) {
    (void)ram_.mem().write(data_gpa, data);
    return request(virtio::VIRTIO_BLK_T_OUT, sector, static_cast<uint32_t>(data.size()), false,
                   data_gpa);
  }
  Done read_sectors(uint64_t sector, uint32_t len, std::vector<uint8_t>* out,
                    uint64_t data_gpa = kDataGpa) {
    Done d = request(virtio::VIRTIO_BLK_T_IN, sector, len, true, data_gpa);
    out->resize(len);
    (void)ram_.mem().read(data_gpa, *out);
    return d;
  }
  /// A DISCARD / WRITE_ZEROES request with one segment.
  Done zero_request(uint32_t type, uint64_t sector, uint32_t sectors, uint32_t flags) {
    put_header(type, 0);
    (void)ram_.mem().write_obj(kDataGpa, virtio::VirtioBlkDiscardWriteZeroes{sector, sectors, flags});
    return submit({{kHeaderGpa, 16, false}, {kDataGpa, 16, false}, {kStatusGpa, 1, true}});
  }
  /// A well-formed read must still work (the device survived whatever came before).
  void expect_alive(uint16_t q = 0) {
    put_header(virtio::VIRTIO_BLK_T_IN, 0);
    Done d = submit({{kHeaderGpa, 16, false}, {kDataGpa, 512, true}, {kStatusGpa, 1, true}},
                    kStatusGpa, q);
    EXPECT_EQ(d.status, virtio::VIRTIO_BLK_S_OK);
    EXPECT_EQ(d.used_len, 513u);
  }

  std::string dir_, path_;
  FakeGuestRam ram_;
  std::shared_ptr<FakeVirtioInterrupt> irq_ = std::make_shared<FakeVirtioInterrupt>();
  std::shared_ptr<VirtioBlock> dev_;
  std::vector<std::unique_ptr<FakeVirtqueueDriver>> drivers_;
  std::vector<UniqueFd> kicks_;
};

}  // namespace tern::testing
