// NvmeController admin command set: Identify, queue creation/deletion statuses, features, log
// pages, Abort, Asynchronous Event Request limit, unknown opcodes.
#include <gtest/gtest.h>

#include "nvme/nvme_controller.h"
#include "nvme/testing/nvme_test_driver.h"

namespace tern::nvme {
namespace {

using testing::kNvmeDataGpa;
using testing::NvmeTestDriver;
using testing::NvmeTestMachine;

class NvmeAdminTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(d.enable()); }
  template <class T>
  T at(size_t off) {
    T v;
    std::memcpy(&v, d.data(off), sizeof v);
    return v;
  }
  NvmeTestMachine m;
  NvmeTestDriver d{m};
};

TEST_F(NvmeAdminTest, Identify) {
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminIdentify, .prp1 = kNvmeDataGpa, .cdw10 = kCnsController}),
            kSuccess);
  EXPECT_EQ(at<uint16_t>(kIdCtrlVid), kPciVendorRedHat);
  EXPECT_EQ(at<uint8_t>(kIdCtrlSqes), 0x66);
  EXPECT_EQ(at<uint8_t>(kIdCtrlCqes), 0x44);
  EXPECT_EQ(at<uint32_t>(kIdCtrlNn), 1u);
  EXPECT_EQ(at<uint8_t>(kIdCtrlAerl), kAerLimit - 1);
  EXPECT_TRUE(at<uint16_t>(kIdCtrlOacs) & kOacsDoorbellBufferConfig);
  EXPECT_EQ(
      d.admin_cmd(
          {.opcode = kAdminIdentify, .nsid = 1, .prp1 = kNvmeDataGpa, .cdw10 = kCnsNamespace}),
      kSuccess);
  EXPECT_EQ(at<uint64_t>(kIdNsNsze), (4u << 20) / 512);
  EXPECT_EQ(d.admin_cmd(
                {.opcode = kAdminIdentify, .prp1 = kNvmeDataGpa, .cdw10 = kCnsActiveNamespaceList}),
            kSuccess);
  EXPECT_EQ(at<uint32_t>(0), 1u);
  EXPECT_EQ(at<uint32_t>(4), 0u);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminIdentify,
                         .nsid = 1,
                         .prp1 = kNvmeDataGpa,
                         .cdw10 = kCnsNamespaceDescriptorList}),
            kSuccess);
  EXPECT_NE(at<uint8_t>(0), 0);  // a descriptor type
  // Errors.
  EXPECT_EQ(
      d.admin_cmd(
          {.opcode = kAdminIdentify, .nsid = 2, .prp1 = kNvmeDataGpa, .cdw10 = kCnsNamespace}),
      kInvalidNamespace);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminIdentify, .prp1 = kNvmeDataGpa, .cdw10 = 0x10}),
            kInvalidField);
  EXPECT_EQ(
      d.admin_cmd({.opcode = kAdminIdentify, .prp1 = 0x7FFF0000000ull, .cdw10 = kCnsController}),
      kDataTransferError);
  EXPECT_EQ(
      d.admin_cmd(
          {.opcode = kAdminIdentify, .flags = 0x40, .prp1 = kNvmeDataGpa, .cdw10 = kCnsController}),
      kInvalidField);  // SGL
}

TEST_F(NvmeAdminTest, NumberOfQueues) {
  uint32_t dw0 = 0;
  EXPECT_EQ(
      d.admin_cmd(
          {.opcode = kAdminSetFeatures, .cdw10 = kFeatNumberOfQueues, .cdw11 = 2 | (2u << 16)},
          &dw0),
      kSuccess);
  EXPECT_EQ(dw0, 2u | (2u << 16));
  EXPECT_EQ(
      d.admin_cmd(
          {.opcode = kAdminSetFeatures, .cdw10 = kFeatNumberOfQueues, .cdw11 = 99 | (200u << 16)},
          &dw0),
      kSuccess);
  EXPECT_EQ(dw0, 63u | (63u << 16));
  EXPECT_EQ(
      d.admin_cmd({.opcode = kAdminSetFeatures, .cdw10 = kFeatNumberOfQueues, .cdw11 = 0xFFFF}),
      kInvalidField);
  EXPECT_EQ(
      d.admin_cmd(
          {.opcode = kAdminSetFeatures, .cdw10 = kFeatNumberOfQueues, .cdw11 = 1 | (1u << 16)},
          &dw0),
      kSuccess);
  dw0 = 0;
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetFeatures, .cdw10 = kFeatNumberOfQueues}, &dw0),
            kSuccess);
  EXPECT_EQ(dw0, 1u | (1u << 16));
  // Two queues granted: qid 3 is refused.
  EXPECT_EQ(d.create_cq(3, 16), kInvalidQueueIdentifier);
  EXPECT_EQ(d.create_cq(2, 16), kSuccess);
  EXPECT_EQ(
      d.admin_cmd(
          {.opcode = kAdminSetFeatures, .cdw10 = kFeatNumberOfQueues, .cdw11 = 3 | (3u << 16)}),
      kCommandSequenceError);
}

TEST_F(NvmeAdminTest, CreateAndDeleteQueueStatuses) {
  EXPECT_EQ(d.create_cq(0, 16), kInvalidQueueIdentifier);
  EXPECT_EQ(d.create_cq(kMaxIoQueues + 1, 16), kInvalidQueueIdentifier);
  EXPECT_EQ(d.create_cq(1, 1), kInvalidQueueSize);
  EXPECT_EQ(d.create_cq(1, kMaxQueueEntries + 1), kInvalidQueueSize);
  EXPECT_EQ(d.create_cq(1, 16, 0, /*flags=*/2), kInvalidField);  // PC 0 (CAP.CQR)
  EXPECT_EQ(d.create_cq(1, 16, kMsixVectors), kInvalidInterruptVector);
  EXPECT_EQ(d.create_cq(1, 16, 0, 3, 0x7FFF0000000ull), kInvalidField);  // not RAM
  EXPECT_EQ(d.create_cq(1, 16, 0, 3, testing::nvme_io_cq_gpa(1) + 16), kInvalidField);
  EXPECT_EQ(d.create_cq(1, 16, 1), kSuccess);
  EXPECT_EQ(d.create_cq(1, 16), kInvalidQueueIdentifier);  // in use

  EXPECT_EQ(d.create_sq(1, 16, 5), kCompletionQueueInvalid);
  EXPECT_EQ(d.create_sq(1, 16, 0), kCompletionQueueInvalid);
  EXPECT_EQ(d.create_sq(0, 16, 1), kInvalidQueueIdentifier);
  EXPECT_EQ(d.create_sq(kMaxIoQueues + 1, 16, 1), kInvalidQueueIdentifier);
  EXPECT_EQ(d.create_sq(1, 1, 1), kInvalidQueueSize);
  EXPECT_EQ(d.create_sq(1, 16, 1, /*flags=*/0), kInvalidField);
  EXPECT_EQ(d.create_sq(1, 16, 1, 1, 0x7FFF0000000ull), kInvalidField);
  EXPECT_EQ(d.create_sq(1, 16, 1), kSuccess);
  EXPECT_EQ(d.create_sq(1, 16, 1), kInvalidQueueIdentifier);
  EXPECT_EQ(d.create_sq(2, 16, 1, 1, testing::nvme_io_sq_gpa(2)), kSuccess);  // two SQs, one CQ

  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoCq, .cdw10 = 1}), kInvalidQueueDeletion);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoSq, .cdw10 = 0}), kInvalidQueueIdentifier);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoSq, .cdw10 = 7}), kInvalidQueueIdentifier);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoSq, .cdw10 = 1}), kSuccess);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoSq, .cdw10 = 1}), kInvalidQueueIdentifier);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoSq, .cdw10 = 2}), kSuccess);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoCq, .cdw10 = 0}), kInvalidQueueIdentifier);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoCq, .cdw10 = 1}), kSuccess);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDeleteIoCq, .cdw10 = 1}), kInvalidQueueIdentifier);
}

TEST(NvmeAdminEntrySizes, IoQueuesNeedIosqesAndIocqes) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  d.start_enable(32, testing::kNvmeAsqGpa, testing::kNvmeAcqGpa, /*cc_extra=*/0);
  ASSERT_TRUE(d.wait_csts(kCstsRdy, kCstsRdy));  // allowed at enable: set before I/O queues
  EXPECT_EQ(d.create_cq(1, 16), kInvalidField);
}

TEST_F(NvmeAdminTest, FeaturesStoredAndReported) {
  struct Case {
    uint8_t fid;
    uint32_t value;
  };
  for (Case c : {Case{kFeatArbitration, 0x03020100}, Case{kFeatPowerManagement, 0},
                 Case{kFeatTemperatureThreshold, 0x150}, Case{kFeatErrorRecovery, 0x20},
                 Case{kFeatVolatileWriteCache, 0}, Case{kFeatInterruptCoalescing, 0x0A04},
                 Case{kFeatWriteAtomicity, 1}, Case{kFeatAsyncEventConfig, 0x1F}}) {
    SCOPED_TRACE(c.fid);
    EXPECT_EQ(d.admin_cmd({.opcode = kAdminSetFeatures, .cdw10 = c.fid, .cdw11 = c.value}),
              kSuccess);
    uint32_t dw0 = ~0u;
    EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetFeatures, .cdw10 = c.fid}, &dw0), kSuccess);
    EXPECT_EQ(dw0, c.value);
    // SEL 1: default; SEL 3: capabilities (changeable, not saveable).
    EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetFeatures, .cdw10 = c.fid | (3u << 8)}, &dw0),
              kSuccess);
    EXPECT_EQ(dw0, 4u);
  }
  uint32_t dw0 = 0;
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetFeatures, .cdw10 = kFeatVolatileWriteCache | (1u << 8)},
                        &dw0),
            kSuccess);
  EXPECT_EQ(dw0, 1u);  // default: the cache is on (cache=writeback)
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminSetFeatures, .cdw10 = kFeatPowerManagement, .cdw11 = 1}),
            kInvalidField);  // one power state
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminSetFeatures, .cdw10 = kFeatArbitration | (1u << 31)}),
            kFeatureNotSaveable);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminSetFeatures, .cdw10 = kFeatTimestamp}), kInvalidField);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminSetFeatures, .cdw10 = 0x7F}), kInvalidField);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetFeatures, .cdw10 = 0x7F}), kInvalidField);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetFeatures, .cdw10 = kFeatArbitration | (4u << 8)}),
            kInvalidField);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminSetFeatures,
                         .cdw10 = kFeatInterruptVectorConfig,
                         .cdw11 = kMsixVectors}),
            kInvalidField);
}

TEST_F(NvmeAdminTest, LogPages) {
  auto q = d.create_pair(1, 16, 0);
  ASSERT_EQ(d.rw(q, true, 0, 8), kSuccess);
  ASSERT_EQ(d.rw(q, false, 0, 8), kSuccess);
  ASSERT_EQ(d.rw(q, false, 8, 8), kSuccess);
  std::memset(d.data(), 0xEE, 8192);
  // SMART / Health (512 bytes = 128 dwords): host read commands at byte 64, write commands at 80.
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetLogPage,
                         .nsid = 0xFFFFFFFF,
                         .prp1 = kNvmeDataGpa,
                         .cdw10 = kLogSmartHealth | (127u << 16)}),
            kSuccess);
  EXPECT_EQ(at<uint64_t>(32), 1u);  // data units read: 8 KiB rounds up to one unit
  EXPECT_EQ(at<uint64_t>(48), 1u);  // data units written
  EXPECT_EQ(at<uint64_t>(64), 2u);
  EXPECT_EQ(at<uint64_t>(80), 1u);
  EXPECT_EQ(at<uint8_t>(512), 0xEE);  // only NUMD dwords written
  // LPO and a length past the page: zero filled.
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetLogPage,
                         .prp1 = kNvmeDataGpa,
                         .prp2 = kNvmeDataGpa + 4096,
                         .cdw10 = kLogSmartHealth | (1023u << 16),
                         .cdw12 = 64}),
            kSuccess);
  EXPECT_EQ(at<uint64_t>(0), 2u);
  EXPECT_EQ(at<uint8_t>(600), 0);
  EXPECT_EQ(at<uint8_t>(4095), 0);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetLogPage,
                         .prp1 = kNvmeDataGpa,
                         .cdw10 = kLogFirmwareSlot | (127u << 16)}),
            kSuccess);
  EXPECT_EQ(
      d.admin_cmd(
          {.opcode = kAdminGetLogPage, .prp1 = kNvmeDataGpa, .cdw10 = kLogError | (15u << 16)}),
      kSuccess);
  EXPECT_EQ(
      d.admin_cmd({.opcode = kAdminGetLogPage, .prp1 = kNvmeDataGpa, .cdw10 = 0x70 | (15u << 16)}),
      kInvalidLogPage);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetLogPage,
                         .prp1 = kNvmeDataGpa,
                         .cdw10 = kLogSmartHealth | (15u << 16),
                         .cdw12 = 2}),
            kInvalidField);  // LPO not dword aligned
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetLogPage,
                         .prp1 = kNvmeDataGpa,
                         .cdw10 = kLogSmartHealth | (15u << 16),
                         .cdw12 = 4096}),
            kInvalidField);  // LPO past the page
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetLogPage,
                         .prp1 = kNvmeDataGpa,
                         .cdw10 = kLogSmartHealth | (0xFFFFu << 16),
                         .cdw11 = 0xFFFF}),
            kInvalidField);  // 16 GiB: more than MDTS
}

TEST_F(NvmeAdminTest, AbortKeepAliveAndUnknownOpcodes) {
  uint32_t dw0 = 0;
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminAbort, .cdw10 = 5u << 16}, &dw0), kSuccess);
  EXPECT_EQ(dw0 & 1, 1u);  // not aborted
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminKeepAlive}), kSuccess);
  for (uint8_t op : {0x03, 0x10, 0x11, 0x80, 0x81, 0xC0, 0xFF}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(d.admin_cmd({.opcode = op}), kInvalidOpcode);
  }
}

TEST_F(NvmeAdminTest, AsyncEventRequestLimit) {
  for (uint16_t i = 0; i < kAerLimit; ++i)
    d.submit(d.admin(), {.opcode = kAdminAsyncEventRequest, .cid = static_cast<uint16_t>(900 + i)});
  auto e = d.run(d.admin(), {.opcode = kAdminAsyncEventRequest, .cid = 950});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->cid, 950);
  EXPECT_EQ(testing::nvme_cqe_status(*e), kAsyncEventLimitExceeded);
  // An event completes the oldest one.
  d.bar_write32(doorbell_offset(33, false), 0);
  e = d.reap(d.admin());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->cid, 900);
  EXPECT_EQ(testing::nvme_cqe_status(*e), kSuccess);
}

TEST_F(NvmeAdminTest, DoorbellBufferConfigValidation) {
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDoorbellBufferConfig, .prp1 = 0x60010, .prp2 = 0x61000}),
            kInvalidField);
  EXPECT_EQ(d.admin_cmd(
                {.opcode = kAdminDoorbellBufferConfig, .prp1 = 0x60000, .prp2 = 0x7FFF0000000ull}),
            kInvalidField);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDoorbellBufferConfig, .prp1 = 0, .prp2 = 0x61000}),
            kInvalidField);
  EXPECT_EQ(d.counter("shadow_doorbell_enabled"), 0u);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminDoorbellBufferConfig, .prp1 = 0x60000, .prp2 = 0x61000}),
            kSuccess);
  EXPECT_EQ(d.counter("shadow_doorbell_enabled"), 1u);
}

}  // namespace
}  // namespace tern::nvme
