#include "base/host_buffer.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <utility>
#include <vector>

namespace tern {
namespace {

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

/// True when the page holding `p` is mapped in this process (mincore fails with ENOMEM if not).
bool page_mapped(const void* p) {
  auto addr = reinterpret_cast<uintptr_t>(p) & ~(kPage - 1);
  unsigned char vec = 0;
  return ::mincore(reinterpret_cast<void*>(addr), kPage, &vec) == 0;
}

TEST(HostBuffer, AllocatesZeroFilledWritableBytes) {
  auto buf = HostBuffer::allocate(3 * kPage + 5);
  ASSERT_TRUE(buf) << buf.error().message();
  ASSERT_EQ(buf->size(), 3 * kPage + 5);
  for (uint8_t b : buf->bytes()) ASSERT_EQ(b, 0);
  buf->bytes()[buf->size() - 1] = 0xAB;
  EXPECT_EQ(buf->bytes().back(), 0xAB);
}

TEST(HostBuffer, ZeroSizeHoldsNoMapping) {
  auto buf = HostBuffer::allocate(0);
  ASSERT_TRUE(buf);
  EXPECT_EQ(buf->size(), 0u);
  EXPECT_EQ(buf->bytes().data(), nullptr);
}

TEST(HostBuffer, ImpossibleSizeIsAnMmapError) {
  auto buf = HostBuffer::allocate(SIZE_MAX - 1);
  ASSERT_FALSE(buf);
  EXPECT_EQ(buf.error().op, "mmap");
  EXPECT_EQ(buf.error().errnum, ENOMEM);
  EXPECT_NE(buf.error().context.find("bytes"), std::string::npos);
}

TEST(HostBuffer, MoveTransfersTheMappingAndDestructorUnmaps) {
  auto a = HostBuffer::allocate(2 * kPage);
  ASSERT_TRUE(a);
  uint8_t* p = a->bytes().data();
  a->bytes()[0] = 7;
  HostBuffer b(std::move(*a));
  EXPECT_EQ(a->size(), 0u);
  EXPECT_EQ(b.bytes().data(), p);
  EXPECT_EQ(b.bytes()[0], 7);
  HostBuffer c;
  c = std::move(b);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(c.size(), 2 * kPage);
  EXPECT_TRUE(page_mapped(p));
  c = HostBuffer();  // move-assigning an empty buffer unmaps the old mapping
  EXPECT_FALSE(page_mapped(p));
  EXPECT_FALSE(page_mapped(p + kPage));
}

TEST(HostBuffer, ShrinkUnmapsWholeTailPagesOnly) {
  auto buf = HostBuffer::allocate(4 * kPage);
  ASSERT_TRUE(buf);
  uint8_t* p = buf->bytes().data();
  buf->bytes()[kPage + 10] = 9;
  buf->shrink(kPage + 11);
  EXPECT_EQ(buf->size(), kPage + 11);
  EXPECT_EQ(buf->bytes()[kPage + 10], 9);
  EXPECT_TRUE(page_mapped(p + kPage));  // partly used page stays
  EXPECT_FALSE(page_mapped(p + 2 * kPage));
  EXPECT_FALSE(page_mapped(p + 3 * kPage));
  buf->shrink(0);
  EXPECT_EQ(buf->size(), 0u);
  EXPECT_FALSE(page_mapped(p));
}

}  // namespace
}  // namespace tern
