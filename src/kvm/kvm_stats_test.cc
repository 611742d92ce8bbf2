#include "kvm/kvm_stats.h"

#include <gtest/gtest.h>
#include <linux/kvm.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

namespace tern {
namespace {

void put32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  std::memcpy(b.data() + at, &v, 4);
}

// A stats block laid out as the KVM API doc describes, with name_size 16 and the descriptors after
// the id: "exits" (cumulative, 1 value), "pages_4k" (instant), "halt_hist" (log hist, 3 buckets).
UniqueFd fake_stats_fd() {
  constexpr uint32_t kName = 16, kId = 24, kDesc = kId + kName, kDescBytes = 16 + kName;
  constexpr uint32_t kData = kDesc + 3 * kDescBytes;
  std::vector<uint8_t> b(kData + 5 * 8, 0);
  put32(b, 0, 0);
  put32(b, 4, kName);
  put32(b, 8, 3);
  put32(b, 12, kId);
  put32(b, 16, kDesc);
  put32(b, 20, kData);
  std::memcpy(b.data() + kId, "kvm-1/vcpu-0", 12);
  struct D {
    uint32_t flags;
    int16_t exp;
    uint16_t size;
    uint32_t offset;
    const char* name;
  } d[] = {
      {KVM_STATS_TYPE_CUMULATIVE | KVM_STATS_UNIT_NONE, 0, 1, 0, "exits"},
      {KVM_STATS_TYPE_INSTANT | KVM_STATS_UNIT_BYTES | KVM_STATS_BASE_POW2, 12, 1, 8, "pages_4k"},
      {KVM_STATS_TYPE_LOG_HIST | KVM_STATS_UNIT_SECONDS, -9, 3, 16, "halt_hist"}};
  for (int i = 0; i < 3; ++i) {
    size_t at = kDesc + i * kDescBytes;
    put32(b, at, d[i].flags);
    std::memcpy(b.data() + at + 4, &d[i].exp, 2);
    std::memcpy(b.data() + at + 6, &d[i].size, 2);
    put32(b, at + 8, d[i].offset);
    std::memcpy(b.data() + at + 16, d[i].name, std::strlen(d[i].name));
  }
  uint64_t vals[] = {1234, 7, 1, 2, 3};
  std::memcpy(b.data() + kData, vals, sizeof vals);
  int fd = ::memfd_create("fake-kvm-stats", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, b.data(), b.size()), static_cast<ssize_t>(b.size()));
  return UniqueFd(fd);
}

TEST(KvmStatsReader, ParsesDescriptorsFromOffsets) {
  auto r = KvmStatsReader::from_fd(fake_stats_fd());
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->id(), "kvm-1/vcpu-0");
  auto v = r->read();
  ASSERT_TRUE(v) << v.error().message();
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[0].name, "exits");
  EXPECT_EQ((*v)[0].type, "cumulative");
  EXPECT_EQ((*v)[0].values, std::vector<uint64_t>{1234});
  EXPECT_EQ((*v)[1].name, "pages_4k");
  EXPECT_EQ((*v)[1].type, "instant");
  EXPECT_EQ((*v)[1].unit, "bytes");
  EXPECT_EQ((*v)[1].base, 2);
  EXPECT_EQ((*v)[1].exponent, 12);
  EXPECT_EQ((*v)[2].type, "log_hist");
  EXPECT_EQ((*v)[2].unit, "seconds");
  EXPECT_EQ((*v)[2].values, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(KvmStatsReader, RejectsTruncatedHeader) {
  int fd = ::memfd_create("short", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  auto r = KvmStatsReader::from_fd(UniqueFd(fd));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("short read"), std::string::npos) << r.error().message();
}

TEST(KvmStatsReader, OpenOnNonKvmFdFailsWithIoctlName) {
  int fd = ::memfd_create("not-kvm", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  UniqueFd owner(fd);
  auto r = KvmStatsReader::open(owner.borrow());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().op, "KVM_GET_STATS_FD");
  EXPECT_NE(r.error().errnum, 0);
}

}  // namespace
}  // namespace tern
