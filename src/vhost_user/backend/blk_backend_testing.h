// Test helpers for the back-end's tests: a back-end serving a temporary image on a thread, and a
// minimal front-end over a Channel whose guest RAM is a memfd the test maps too.
#pragma once

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/testing/eventually.h"
#include "base/testing/temp_dir.h"
#include "cli/vhost_user_blk_command.h"
#include "vhost_user/backend/blk_backend.h"
#include "vhost_user/vhost_user_channel.h"
#include "virtio/block/virtio_blk_spec.h"
#include "virtio/testing/fake_virtqueue_driver.h"

namespace tern::vhost_user::testing {

inline constexpr uint64_t kImageBytes = 64 * 1024;
inline constexpr uint64_t kRamBytes = 2 << 20;
inline constexpr uint64_t kUserBase = 0x7f0000000000;  // the "front-end's" address of gpa 0
inline constexpr uint16_t kRingSize = 16;
inline constexpr uint64_t kRingGpa = 0x1000;

/// `tern vhost-user-blk` on a thread (seccomp off: it would confine the test binary), or with
/// `confined`, the command itself (seccomp on) in a forked child stopped by SIGTERM.
class BackendThread {
 public:
  explicit BackendThread(bool confined = false) {
    image_ = dir_.path() + "/disk.img";
    socket_ = dir_.path() + "/blk.sock";
    int fd = ::open(image_.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    std::vector<uint8_t> pattern(kImageBytes);
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + 3);
    EXPECT_EQ(::pwrite(fd, pattern.data(), pattern.size(), 0), static_cast<ssize_t>(kImageBytes));
    ::close(fd);
    BlkBackendOptions o;
    o.socket = socket_;
    o.disk.path = image_;
    o.seccomp = false;
    o.stats_on_exit = false;
    if (confined) {
      VhostUserBlkOptions c;
      c.socket = socket_;
      c.disk = "path=" + image_;
      child_ = ::fork();
      if (child_ == 0) ::_exit(run_vhost_user_blk(c));
      return;
    }
    thread_ = std::thread([this, o] { result_ = run_blk_backend(o, stop_); });
  }
  ~BackendThread() {
    if (child_ > 0) {
      if (!stopped_) (void)stop_child();
      return;
    }
    stop_ = true;
    thread_.join();
  }
  /// Confined: SIGTERM, then the child's exit status (-1 if it did not exit normally).
  int stop_child() {
    stopped_ = true;
    ::kill(child_, SIGTERM);
    int status = 0;
    if (::waitpid(child_, &status, 0) != child_ || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }
  [[nodiscard]] const std::string& socket() const { return socket_; }
  /// Connects (waiting for the socket to be listened at).
  Channel connect() {
    Result<Channel> ch = fail("not yet");
    EXPECT_TRUE(tern::testing::eventually([&] {
      ch = Channel::connect(socket_);
      return ch.has_value();
    }));
    return std::move(ch.value());
  }
  std::vector<uint8_t> read_image(uint64_t offset, size_t len) const {
    std::vector<uint8_t> out(len);
    int fd = ::open(image_.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_EQ(::pread(fd, out.data(), len, static_cast<off_t>(offset)), static_cast<ssize_t>(len));
    ::close(fd);
    return out;
  }

 private:
  tern::testing::TempDir dir_{"tern-vub"};
  std::string image_, socket_;
  std::atomic<bool> stop_{false};
  pid_t child_ = -1;
  bool stopped_ = false;
  Result<void> result_;
  std::thread thread_;
};

/// Guest RAM in a memfd, mapped here as the front-end maps it, with one split ring at kRingGpa.
class BackendRam {
 public:
  explicit BackendRam(uint16_t ring_size = kRingSize) {
    fd_ = UniqueFd(::memfd_create("test-ram", MFD_CLOEXEC));
    EXPECT_EQ(::ftruncate(fd_.get(), kRamBytes), 0);
    host_ = static_cast<uint8_t*>(
        ::mmap(nullptr, kRamBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0));
    mem_.emplace(GuestMemory::wrap({MemoryRegion{0, kRamBytes, host_, 0}}));
    driver_.emplace(*mem_, kRingGpa, ring_size);
  }
  ~BackendRam() { ::munmap(host_, kRamBytes); }
  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] const GuestMemory& mem() const { return *mem_; }
  tern::testing::FakeVirtqueueDriver& driver() { return *driver_; }
  [[nodiscard]] VhostUserMemoryRegion region() const {
    return VhostUserMemoryRegion{0, kRamBytes, kUserBase, 0};
  }
  [[nodiscard]] VhostVringAddr addr() const {
    const auto& c = driver_->config();
    VhostVringAddr a;
    a.desc_user_addr = kUserBase + c.desc_gpa;
    a.avail_user_addr = kUserBase + c.avail_gpa;
    a.used_user_addr = kUserBase + c.used_gpa;
    return a;
  }
  /// A virtio-blk request: header at `at`, `len` data bytes at at+0x100, status at at+0x80.
  uint16_t add_request(uint32_t type, uint64_t sector, uint64_t at, uint32_t len) {
    virtio::VirtioBlkOuthdr h{type, 0, sector};
    EXPECT_TRUE(mem_->write_obj(at, h).has_value());
    EXPECT_TRUE(mem_->write_obj(at + 0x80, uint8_t{0xff}).has_value());
    bool in = type == virtio::VIRTIO_BLK_T_IN;
    return driver_->add_chain({{at, 16, false}, {at + 0x100, len, in}, {at + 0x80, 1, true}});
  }
  [[nodiscard]] uint8_t status(uint64_t at) const { return mem_->read_obj<uint8_t>(at + 0x80).value(); }
  uint8_t* data(uint64_t at) { return host_ + at + 0x100; }

 private:
  UniqueFd fd_;
  uint8_t* host_ = nullptr;
  std::optional<GuestMemory> mem_;
  std::optional<tern::testing::FakeVirtqueueDriver> driver_;
};

/// A minimal front-end: one request, one reply, over a Channel.
class MiniFrontend {
 public:
  explicit MiniFrontend(Channel ch) : ch_(std::move(ch)) {}
  template <class T>
  Result<Message> call(uint32_t request, const T& body, std::vector<int> fds = {},
                       bool need_reply = false) {
    TRY(ch_.send(make_request(request, body, need_reply), fds));
    return ch_.recv(std::chrono::seconds(10));
  }
  Result<Message> call(uint32_t request) {
    TRY(ch_.send(make_request(request, std::span<const uint8_t>{})));
    return ch_.recv(std::chrono::seconds(10));
  }
  /// A request acked with REPLY_ACK (negotiated by negotiate()).
  template <class T>
  Result<void> acked(uint32_t request, const T& body, std::vector<int> fds = {}) {
    ASSIGN_OR_RETURN(Message m, call(request, body, std::move(fds), true));
    return parse_ack_reply(m, request);
  }
  /// GET/SET_FEATURES, GET/SET_PROTOCOL_FEATURES (all of tern's), SET_OWNER.
  void negotiate() {
    auto f = parse_u64_reply(call(VHOST_USER_GET_FEATURES).value(), VHOST_USER_GET_FEATURES);
    ASSERT_TRUE(f.has_value());
    ASSERT_TRUE(*f & (uint64_t{1} << VHOST_USER_F_PROTOCOL_FEATURES));
    ASSERT_TRUE(ch_.send(make_request(VHOST_USER_SET_FEATURES, *f)).has_value());
    auto p = parse_u64_reply(call(VHOST_USER_GET_PROTOCOL_FEATURES).value(),
                             VHOST_USER_GET_PROTOCOL_FEATURES);
    ASSERT_TRUE(p.has_value());
    ASSERT_EQ(*p & kTernProtocolFeatures, kTernProtocolFeatures);
    ASSERT_TRUE(acked(VHOST_USER_SET_PROTOCOL_FEATURES, kTernProtocolFeatures).has_value());
    ASSERT_TRUE(ch_.send(make_request(VHOST_USER_SET_OWNER, std::span<const uint8_t>{}, true)).has_value());
    auto ack = ch_.recv(std::chrono::seconds(10));
    ASSERT_TRUE(ack.has_value());
    ASSERT_TRUE(parse_ack_reply(*ack, VHOST_USER_SET_OWNER).has_value());
  }
  /// Memory table, ring 0 (num = the ring's size, addr, base, call, kick, enable).
  void start_ring(BackendRam& ram, uint16_t base, int kick, int call) {
    VhostUserMemory m;
    m.nregions = 1;
    m.regions[0] = ram.region();
    std::vector<uint8_t> body(8 + sizeof(VhostUserMemoryRegion));
    std::memcpy(body.data(), &m, body.size());
    ASSERT_TRUE(ch_.send(make_request(VHOST_USER_SET_MEM_TABLE, body, true),
                         std::vector<int>{ram.fd()}).has_value());
    auto ack = ch_.recv(std::chrono::seconds(10));
    ASSERT_TRUE(ack.has_value());
    ASSERT_TRUE(parse_ack_reply(*ack, VHOST_USER_SET_MEM_TABLE).has_value());
    ASSERT_TRUE(acked(VHOST_USER_SET_VRING_NUM, VhostVringState{0, ram.driver().config().size})
                    .has_value());
    ASSERT_TRUE(acked(VHOST_USER_SET_VRING_ADDR, ram.addr()).has_value());
    ASSERT_TRUE(acked(VHOST_USER_SET_VRING_BASE, VhostVringState{0, base}).has_value());
    ASSERT_TRUE(acked(VHOST_USER_SET_VRING_CALL, uint64_t{0}, {call}).has_value());
    ASSERT_TRUE(acked(VHOST_USER_SET_VRING_KICK, uint64_t{0}, {kick}).has_value());
    ASSERT_TRUE(acked(VHOST_USER_SET_VRING_ENABLE, VhostVringState{0, 1}).has_value());
  }
  /// GET_CONFIG: the whole virtio-blk config space.
  virtio::VirtioBlkConfig config() {
    VhostUserConfigHeader h{0, sizeof(virtio::VirtioBlkConfig), 0};
    std::vector<uint8_t> b(sizeof h + h.size);
    std::memcpy(b.data(), &h, sizeof h);
    virtio::VirtioBlkConfig c{};
    auto cfg = parse_config_reply(call(VHOST_USER_GET_CONFIG, b).value(), h.size);
    EXPECT_TRUE(cfg.has_value());
    if (cfg) std::memcpy(&c, cfg->data(), sizeof c);
    return c;
  }
  Channel& channel() { return ch_; }

 private:
  Channel ch_;
};

/// A back-end on a thread, a front-end connected to it, guest RAM with a ring of `ring_size`, and
/// the ring's kick and call eventfds: negotiate(), then start() serves ring 0.
struct ServedRing {
  explicit ServedRing(uint16_t ring_size = kRingSize) : ram(ring_size) {}
  void negotiate() { fe.negotiate(); }
  void start() { fe.start_ring(ram, 0, kick_fd.get(), call_fd.get()); }

  BackendThread backend;
  MiniFrontend fe{backend.connect()};
  BackendRam ram;
  UniqueFd kick_fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  UniqueFd call_fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
};

inline void kick(int fd) {
  uint64_t one = 1;
  EXPECT_EQ(::write(fd, &one, sizeof one), 8);
}

}  // namespace tern::vhost_user::testing
