// VhostUserBlk against QEMU's own back-end, qemu-storage-daemon --export type=vhost-user-blk
// (Debian qemu-system-common; skipped where it is not installed): the config space it reports,
// a read request served through the rings in shared memfd RAM, and the daemon killed and started
// again: the front-end reconnects by itself and the next request is served. (qemu-storage-daemon
// 7.2 offers no INFLIGHT_SHMFD, so the inflight replay is covered by backend_session_test.)
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/testing/eventually.h"
#include "vhost_user/frontend/testing/vu_blk_fixture.h"
#include "virtio/block/virtio_blk_spec.h"
#include "virtio/testing/fake_virtqueue_driver.h"

extern char** environ;

namespace tern::vhost_user {
namespace {

using tern::testing::eventually;
using testing::SharedRam;

constexpr const char* kQsd = "/usr/bin/qemu-storage-daemon";
constexpr uint64_t kImageBytes = 1 << 20;

class QsdTest : public VuBlkTest {
 protected:
  void SetUp() override {
    if (::access(kQsd, X_OK) != 0) GTEST_SKIP() << kQsd << " not installed";
    std::ofstream f(img, std::ios::binary);
    std::vector<char> data(kImageBytes);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i / 512 + 1);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.close();
    start_qsd();
  }
  void TearDown() override { kill_qsd(); }

  void start_qsd() {
    std::string file = "driver=file,node-name=" + std::string("disk0") + ",filename=" + img;
    std::string exp =
        "type=vhost-user-blk,id=exp0,node-name=disk0,writable=on,addr.type=unix,"
        "addr.path=" +
        sock;
    std::vector<const char*> argv = {kQsd, "--blockdev", file.c_str()};
    argv.insert(argv.end(), {"--export", exp.c_str(), nullptr});
    std::filesystem::remove(sock);
    ASSERT_EQ(::posix_spawn(&pid, kQsd, nullptr, nullptr, const_cast<char**>(argv.data()), environ),
              0);
    ASSERT_TRUE(eventually([&] { return std::filesystem::exists(sock); }));
  }
  void kill_qsd() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }

  // Makes one VIRTIO_BLK_T_IN of `sector` available, its buffers at 64 KiB × (slot + 4), and
  // kicks.
  void submit_read(tern::testing::FakeVirtqueueDriver& drv, const UniqueFd& kick, uint64_t sector,
                   uint64_t slot) {
    const uint64_t base = 0x10000 * (slot + 4);
    virtio::VirtioBlkOuthdr h{virtio::VIRTIO_BLK_T_IN, 0, sector};
    ASSERT_TRUE(ram.mem().write_obj(base, h));
    ASSERT_TRUE(ram.mem().write_obj<uint8_t>(base + 0x2000, 0xff));
    drv.push_avail(drv.add_chain(
        {{base, sizeof h, false}, {base + 0x1000, 512, true}, {base + 0x2000, 1, true}}));
    uint64_t one = 1;
    ASSERT_EQ(::write(kick.get(), &one, sizeof one), 8);
  }
  // The read in `slot` completed with the image's bytes of `sector`.
  void expect_read(uint64_t sector, uint64_t slot) {
    const uint64_t base = 0x10000 * (slot + 4);
    EXPECT_EQ(ram.mem().read_obj<uint8_t>(base + 0x2000).value(), virtio::VIRTIO_BLK_S_OK);
    EXPECT_EQ(ram.mem().read_obj<uint8_t>(base + 0x1000 + 100).value(),
              static_cast<uint8_t>(sector + 1));
  }
  // One read, waited for.
  void read_sector(tern::testing::FakeVirtqueueDriver& drv, const UniqueFd& kick, uint64_t sector) {
    const uint16_t before = drv.used_idx();
    submit_read(drv, kick, sector, 0);
    ASSERT_TRUE(eventually([&] { return drv.used_idx() != before; }));
    expect_read(sector, 0);
  }

  std::string img = dir.path() + "/disk.img";
  pid_t pid = -1;
  SharedRam ram;
};

TEST_F(QsdTest, ServesReadsAndSurvivesTheDaemonsRestart) {
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  virtio::VirtioBlkConfig c{};
  (*dev)->read_config(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&c), sizeof c));
  EXPECT_EQ(c.capacity, kImageBytes / 512);
  EXPECT_EQ(c.num_queues, 1);

  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  tern::testing::FakeVirtqueueDriver drv(ram.mem(), SharedRam::queue(0).desc_gpa, 256);
  ASSERT_EQ(drv.config().used_gpa, SharedRam::queue(0).used_gpa);
  std::vector<UniqueFd> kicks = SharedRam::kicks(1);
  UniqueFd kick(::dup(kicks[0].get()));
  ASSERT_TRUE((*dev)->activate(ram.mem(), (*dev)->device_features(), {drv.config()},
                               std::move(kicks), irq));
  read_sector(drv, kick, 3);
  EXPECT_GE(irq->wait_more(0, 0), 1u);  // relayed: the test's interrupt has no irqfd

  kill_qsd();
  ASSERT_TRUE(eventually([&] { return counter(**dev, "backend_connected") == 0; }));
  start_qsd();
  ASSERT_TRUE(eventually([&] { return counter(**dev, "backend_reconnects") == 1; }));
  read_sector(drv, kick, 7);
  EXPECT_EQ(irq->needs_reset(), 0u);
  EXPECT_EQ(counter(**dev, "backend_disconnects"), 1u);
}

// A request the guest made available while the daemon was away: the replay after the restart
// starts the vring at used->idx and kicks it once, so the new daemon finds and serves it.
TEST_F(QsdTest, RequestMadeWhileTheDaemonIsAwayIsServedAfterTheRestart) {
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  tern::testing::FakeVirtqueueDriver drv(ram.mem(), SharedRam::queue(0).desc_gpa, 256);
  std::vector<UniqueFd> kicks = SharedRam::kicks(1);
  UniqueFd kick(::dup(kicks[0].get()));
  ASSERT_TRUE((*dev)->activate(ram.mem(), (*dev)->device_features(), {drv.config()},
                               std::move(kicks), irq));
  read_sector(drv, kick, 2);
  kill_qsd();
  ASSERT_TRUE(eventually([&] { return counter(**dev, "backend_connected") == 0; }));
  submit_read(drv, kick, 6, 1);
  uint64_t n = 0;  // the guest's kick, which no daemon saw
  ASSERT_EQ(::read(kick.get(), &n, sizeof n), 8);
  start_qsd();
  ASSERT_TRUE(eventually([&] { return drv.used_idx() == 2; })) << "used " << drv.used_idx();
  ASSERT_TRUE(eventually([&] { return ram.mem().read_obj<uint8_t>(0x52000).value() != 0xff; }))
      << "used elem 1 id " << drv.used_elem(1).id << " len " << drv.used_elem(1).len
      << " elem0 id " << drv.used_elem(0).id;
  expect_read(6, 1);
}

}  // namespace
}  // namespace tern::vhost_user
