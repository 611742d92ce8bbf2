// VhostUserBlk against QEMU's own back-end, qemu-storage-daemon --export type=vhost-user-blk
// (Debian qemu-system-common; skipped where it is not installed): the config space it reports,
// a read request served through the rings in shared memfd RAM, and the daemon killed and started
// again: the front-end reconnects by itself and the next request is served. (qemu-storage-daemon
// 7.2 offers no INFLIGHT_SHMFD, so the inflight replay is covered by backend_session_test.)
// Every request is made available once and completed once (checked with the daemon dead, when
// the used ring can no longer move), and the daemon's log stays empty.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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
  void TearDown() override {
    kill_qsd();
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), "") << "qemu-storage-daemon's log";
  }

  void start_qsd() {
    std::string file = "driver=file,node-name=" + std::string("disk0") + ",filename=" + img;
    std::string exp =
        "type=vhost-user-blk,id=exp0,node-name=disk0,writable=on,addr.type=unix,"
        "addr.path=" +
        sock;
    std::vector<const char*> argv = {kQsd, "--blockdev", file.c_str()};
    argv.insert(argv.end(), {"--export", exp.c_str(), nullptr});
    std::filesystem::remove(sock);
    posix_spawn_file_actions_t io;  // stdout and stderr appended to `log`
    ASSERT_EQ(::posix_spawn_file_actions_init(&io), 0);
    ::posix_spawn_file_actions_addopen(&io, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::posix_spawn_file_actions_adddup2(&io, 1, 2);
    int rc = ::posix_spawn(&pid, kQsd, &io, nullptr, const_cast<char**>(argv.data()), environ);
    ::posix_spawn_file_actions_destroy(&io);
    ASSERT_EQ(rc, 0);
    // Listening, not only bound: the socket file appears at bind(), and a connect() before
    // listen() is refused (create() failed so in 2 of 1000 runs). A probe connection would take
    // the daemon's one client slot, so /proc/net/unix is read instead.
    ASSERT_TRUE(eventually([&] { return listening(sock); })) << sock;
  }
  // `path` is a Unix socket in the listening state (/proc/net/unix: Flags has __SO_ACCEPTCON).
  static bool listening(const std::string& path) {
    std::ifstream in("/proc/net/unix");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string num, refs, protocol, flags, type, state, inode, p;
      // Accepted sockets show the listener's path too: look at every line.
      if (f >> num >> refs >> protocol >> flags >> type >> state >> inode >> p && p == path &&
          (std::stoul(flags, nullptr, 16) & 0x10000) != 0)
        return true;
    }
    return false;
  }
  void kill_qsd() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }

  // Makes one VIRTIO_BLK_T_IN of `sector` available, its buffers at 64 KiB × (slot + 4), and
  // kicks. add_chain() publishes the chain itself: the ring then holds exactly one entry per
  // request (publishing its head a second time made every read a pair of requests: one still
  // in flight at the daemon's SIGKILL was served by the new daemon with the old header, racing
  // the next request in the same buffers: "sector 7 returned sector 3's bytes").
  uint16_t submit_read(const UniqueFd& kick, uint64_t sector, uint64_t slot) {
    const uint64_t base = 0x10000 * (slot + 4);
    virtio::VirtioBlkOuthdr h{virtio::VIRTIO_BLK_T_IN, 0, sector};
    EXPECT_TRUE(ram.mem().write_obj(base, h));
    EXPECT_TRUE(ram.mem().write_obj<uint8_t>(base + 0x2000, 0xff));
    const uint16_t head = drv.add_chain(
        {{base, sizeof h, false}, {base + 0x1000, 512, true}, {base + 0x2000, 1, true}});
    EXPECT_EQ(drv.avail_idx(), ++requests) << "one available entry per request";
    uint64_t one = 1;
    EXPECT_EQ(::write(kick.get(), &one, sizeof one), 8);
    return head;
  }
  // The request published as available entry `n` (0-based) completed as used entry `n` (the
  // daemon serves one at a time here), `head` with 512 bytes + status written, the image's bytes
  // of `sector` in the buffers of `slot`.
  void expect_read(uint16_t n, uint16_t head, uint64_t sector, uint64_t slot) {
    const uint64_t base = 0x10000 * (slot + 4);
    EXPECT_EQ(drv.used_elem(n).id, head);
    EXPECT_EQ(drv.used_elem(n).len, 513u);
    EXPECT_EQ(ram.mem().read_obj<uint8_t>(base + 0x2000).value(), virtio::VIRTIO_BLK_S_OK);
    EXPECT_EQ(ram.mem().read_obj<uint8_t>(base + 0x1000 + 100).value(),
              static_cast<uint8_t>(sector + 1));
  }
  // One read, waited for: every available entry completed.
  void read_sector(const UniqueFd& kick, uint64_t sector) {
    const uint16_t head = submit_read(kick, sector, 0);
    ASSERT_TRUE(eventually([&] { return drv.used_idx() == drv.avail_idx(); }))
        << "used " << drv.used_idx() << " avail " << drv.avail_idx();
    expect_read(static_cast<uint16_t>(requests - 1), head, sector, 0);
  }
  // With the daemon dead the used ring cannot move: each request completed exactly once.
  void expect_each_request_completed_once() {
    kill_qsd();
    EXPECT_EQ(drv.used_idx(), requests);
  }

  std::string img = dir.path() + "/disk.img";
  std::string log = dir.path() + "/qsd.log";
  pid_t pid = -1;
  SharedRam ram;
  tern::testing::FakeVirtqueueDriver drv{ram.mem(), SharedRam::queue(0).desc_gpa, 256};
  uint16_t requests = 0;  // made available so far
};

TEST_F(QsdTest, ServesReadsAndSurvivesTheDaemonsRestart) {
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  virtio::VirtioBlkConfig c{};
  (*dev)->read_config(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&c), sizeof c));
  EXPECT_EQ(c.capacity, kImageBytes / 512);
  EXPECT_EQ(c.num_queues, 1);

  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  ASSERT_EQ(drv.config().used_gpa, SharedRam::queue(0).used_gpa);
  std::vector<UniqueFd> kicks = SharedRam::kicks(1);
  UniqueFd kick(::dup(kicks[0].get()));
  ASSERT_TRUE((*dev)->activate(ram.mem(), (*dev)->device_features(), {drv.config()},
                               std::move(kicks), irq));
  read_sector(kick, 3);
  EXPECT_GE(irq->wait_more(0, 0), 1u);  // relayed: the test's interrupt has no irqfd

  kill_qsd();
  ASSERT_TRUE(eventually([&] { return counter(**dev, "backend_connected") == 0; }));
  start_qsd();
  ASSERT_TRUE(eventually([&] { return counter(**dev, "backend_reconnects") == 1; }));
  read_sector(kick, 7);
  EXPECT_EQ(irq->needs_reset(), 0u);
  EXPECT_EQ(counter(**dev, "backend_disconnects"), 1u);
  expect_each_request_completed_once();
}

// A request the guest made available while the daemon was away: the replay after the restart
// starts the vring at used->idx and kicks it once, so the new daemon finds and serves it.
// (Disabled until issue 31: "used idx 4 instead of 2" was the test's own driver publishing each
// request twice, see submit_read.)
TEST_F(QsdTest, RequestMadeWhileTheDaemonIsAwayIsServedAfterTheRestart) {
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  std::vector<UniqueFd> kicks = SharedRam::kicks(1);
  UniqueFd kick(::dup(kicks[0].get()));
  ASSERT_TRUE((*dev)->activate(ram.mem(), (*dev)->device_features(), {drv.config()},
                               std::move(kicks), irq));
  read_sector(kick, 2);
  kill_qsd();
  ASSERT_TRUE(eventually([&] { return counter(**dev, "backend_connected") == 0; }));
  const uint16_t head = submit_read(kick, 6, 1);
  uint64_t n = 0;  // the guest's kick, which no daemon saw
  ASSERT_EQ(::read(kick.get(), &n, sizeof n), 8);
  start_qsd();
  ASSERT_TRUE(eventually([&] { return drv.used_idx() == 2; })) << "used " << drv.used_idx();
  expect_read(1, head, 6, 1);
  expect_each_request_completed_once();
}

}  // namespace
}  // namespace tern::vhost_user
