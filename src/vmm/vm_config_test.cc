// Unit tests: the memory backend a VM gets (automatic with a vhost-user disk, refused when anon).
#include "vmm/vm_config.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

std::vector<DeviceSpec> disks(bool vhost_user) {
  DiskConfig local;
  local.path = "/img";
  std::vector<DeviceSpec> d{DeviceSpec(std::in_place_type<DiskSpec>, local)};
  if (vhost_user) {
    DiskConfig remote;
    remote.vhost_user_socket = "/run/vhost.sock";
    d.emplace_back(std::in_place_type<DiskSpec>, remote);
  }
  return d;
}

TEST(ChooseMemoryBackend, AutomaticIsMemfdOnlyWithAVhostUserDisk) {
  EXPECT_EQ(choose_memory_backend(std::nullopt, {}, "--memory-backend"), MemoryBackend::kAnon);
  EXPECT_EQ(choose_memory_backend(std::nullopt, disks(false), "--memory-backend"),
            MemoryBackend::kAnon);
  EXPECT_EQ(choose_memory_backend(std::nullopt, disks(true), "--memory-backend"),
            MemoryBackend::kMemfd);
}

TEST(ChooseMemoryBackend, ExplicitChoiceWinsExceptAnonWithVhostUser) {
  EXPECT_EQ(choose_memory_backend(MemoryBackend::kHugetlbfs, disks(true), "--memory-backend"),
            MemoryBackend::kHugetlbfs);
  EXPECT_EQ(choose_memory_backend(MemoryBackend::kMemfd, disks(false), "--memory-backend"),
            MemoryBackend::kMemfd);
  EXPECT_EQ(choose_memory_backend(MemoryBackend::kAnon, disks(false), "--memory-backend"),
            MemoryBackend::kAnon);
  auto refused = choose_memory_backend(MemoryBackend::kAnon, disks(true), "--memory-backend");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message(),
            "--memory-backend anon: a vhost-user disk needs shared memory (memfd or hugetlbfs)");
}

}  // namespace
}  // namespace tern
