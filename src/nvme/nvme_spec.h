// The NVMe wire format tern's emulated controller speaks: controller registers (NVMe base spec 1.4
// §3.1), submission/completion queue entries (§4.2, §4.6), opcodes (§5, §6), status codes
// (§4.6.1.2), Identify and log page layouts (§5.15, §5.14), feature identifiers (§5.21). Names are
// the spec's. Little-endian, as on x86; structs are the exact on-the-wire layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tern::nvme {

// ---- Controller registers (§3.1): byte offsets into BAR0 ----
inline constexpr uint32_t kRegCap = 0x00;     ///< Controller Capabilities, 64-bit.
inline constexpr uint32_t kRegVs = 0x08;      ///< Version.
inline constexpr uint32_t kRegIntms = 0x0C;   ///< Interrupt Mask Set (INTx only).
inline constexpr uint32_t kRegIntmc = 0x10;   ///< Interrupt Mask Clear (INTx only).
inline constexpr uint32_t kRegCc = 0x14;      ///< Controller Configuration.
inline constexpr uint32_t kRegCsts = 0x1C;    ///< Controller Status.
inline constexpr uint32_t kRegNssr = 0x20;    ///< NVM Subsystem Reset (not supported: CAP.NSSRS 0).
inline constexpr uint32_t kRegAqa = 0x24;     ///< Admin Queue Attributes.
inline constexpr uint32_t kRegAsq = 0x28;     ///< Admin Submission Queue Base Address, 64-bit.
inline constexpr uint32_t kRegAcq = 0x30;     ///< Admin Completion Queue Base Address, 64-bit.
inline constexpr uint32_t kRegDoorbells = 0x1000;  ///< SQ0TDBL; see doorbell_offset().

/// Doorbell stride: CAP.DSTRD = 0, 4 bytes between doorbells.
inline constexpr uint32_t kDoorbellStride = 4;
/// Byte offset in BAR0 of SQyTDBL (`completion` false) or CQyHDBL (true) for queue `qid` (§3.1.24).
constexpr uint32_t doorbell_offset(uint16_t qid, bool completion) {
  return kRegDoorbells + (2u * qid + (completion ? 1u : 0u)) * kDoorbellStride;
}
/// Byte offset of the same doorbell within a Doorbell Buffer Config shadow / EventIdx page
/// (§5.8: same layout as the doorbell registers, starting at 0).
constexpr uint32_t shadow_offset(uint16_t qid, bool completion) {
  return (2u * qid + (completion ? 1u : 0u)) * kDoorbellStride;
}

// CAP fields (§3.1.1).
inline constexpr uint64_t kCapMqesMask = 0xFFFF;          ///< Max Queue Entries Supported, 0's based.
inline constexpr uint64_t kCapCqr = 1ull << 16;           ///< Contiguous Queues Required.
inline constexpr unsigned kCapToShift = 24;               ///< Timeout, 500 ms units (bits 31:24).
inline constexpr unsigned kCapDstrdShift = 32;            ///< Doorbell Stride (bits 35:32).
inline constexpr uint64_t kCapCssNvm = 1ull << 37;        ///< CSS bit 0: NVM command set.
inline constexpr unsigned kCapMpsminShift = 48;           ///< 2^(12+MPSMIN) bytes.
inline constexpr unsigned kCapMpsmaxShift = 52;

// CC fields (§3.1.5).
inline constexpr uint32_t kCcEn = 1u << 0;
inline constexpr unsigned kCcCssShift = 4;    ///< I/O Command Set Selected (3 bits); 0 = NVM.
inline constexpr unsigned kCcMpsShift = 7;    ///< Memory Page Size: 2^(12+MPS) bytes (4 bits).
inline constexpr unsigned kCcAmsShift = 11;   ///< Arbitration Mechanism (3 bits); 0 = round robin.
inline constexpr unsigned kCcShnShift = 14;   ///< Shutdown Notification (2 bits).
inline constexpr unsigned kCcIosqesShift = 16;  ///< I/O SQ Entry Size, 2^n bytes (4 bits); 6.
inline constexpr unsigned kCcIocqesShift = 20;  ///< I/O CQ Entry Size, 2^n bytes (4 bits); 4.
inline constexpr uint32_t kShnNone = 0, kShnNormal = 1, kShnAbrupt = 2;

// CSTS fields (§3.1.6).
inline constexpr uint32_t kCstsRdy = 1u << 0;
inline constexpr uint32_t kCstsCfs = 1u << 1;   ///< Controller Fatal Status.
inline constexpr unsigned kCstsShstShift = 2;   ///< Shutdown Status (2 bits).
inline constexpr uint32_t kShstNormal = 0, kShstOccurring = 1, kShstComplete = 2;

// AQA fields (§3.1.8): 0's based sizes.
inline constexpr uint32_t kAqaAsqsMask = 0xFFF;
inline constexpr unsigned kAqaAcqsShift = 16;

/// Version 1.4.0 (§3.1.2).
inline constexpr uint32_t kVersion14 = 0x00010400;

// ---- Queue entries ----

/// Submission Queue Entry, 64 bytes (§4.2). CDW0: OPC 7:0, FUSE 9:8, PSDT 15:14, CID 31:16.
struct SubmissionEntry {
  uint8_t opcode = 0;
  uint8_t flags = 0;  ///< FUSE 1:0, PSDT 7:6 (0 = PRPs; SGLs are not supported).
  uint16_t cid = 0;
  uint32_t nsid = 0;
  uint32_t cdw2 = 0, cdw3 = 0;
  uint64_t mptr = 0;
  uint64_t prp1 = 0;  ///< DPTR: PRP Entry 1.
  uint64_t prp2 = 0;  ///< DPTR: PRP Entry 2 (a page or a PRP list pointer).
  uint32_t cdw10 = 0, cdw11 = 0, cdw12 = 0, cdw13 = 0, cdw14 = 0, cdw15 = 0;
};
static_assert(sizeof(SubmissionEntry) == 64);
static_assert(std::is_trivially_copyable_v<SubmissionEntry>);

/// Completion Queue Entry, 16 bytes (§4.6). `status`: P bit 0, SC 8:1, SCT 11:9, CRD 13:12,
/// M 14, DNR 15.
struct CompletionEntry {
  uint32_t dw0 = 0;  ///< Command specific.
  uint32_t dw1 = 0;  ///< Reserved (0).
  uint16_t sq_head = 0;
  uint16_t sq_id = 0;
  uint16_t cid = 0;
  uint16_t status = 0;  ///< Phase tag in bit 0.
};
static_assert(sizeof(CompletionEntry) == 16);

inline constexpr unsigned kSqEntryShift = 6;  ///< 64-byte SQ entries (SQES 6).
inline constexpr unsigned kCqEntryShift = 4;  ///< 16-byte CQ entries (CQES 4).

// ---- Status (§4.6.1.2): SCT << 8 | SC; DNR added by make_status() ----
enum class StatusType : uint8_t { kGeneric = 0, kCommandSpecific = 1, kMediaError = 2 };

/// A completion status as (SCT, SC), without the phase tag. 0 = Successful Completion.
struct Status {
  uint16_t value = 0;  ///< SCT (bits 10:8) << 8 | SC (7:0), plus kDnr.
  static constexpr uint16_t kDnr = 1u << 14;  ///< Do Not Retry (bit 15 of the CQE status field).
  [[nodiscard]] constexpr bool ok() const { return (value & 0x7FF) == 0; }
  [[nodiscard]] constexpr uint8_t sc() const { return value & 0xFF; }
  [[nodiscard]] constexpr uint8_t sct() const { return (value >> 8) & 0x7; }
  /// The CQE's status field (bits 15:1) for phase tag `phase`.
  [[nodiscard]] constexpr uint16_t field(bool phase) const {
    return static_cast<uint16_t>(((value & 0x7FF) << 1) | ((value & kDnr) ? 0x8000 : 0) |
                                 (phase ? 1 : 0));
  }
  friend constexpr bool operator==(Status, Status) = default;
};
/// Status with Do Not Retry set (every error tern returns is final: the host image or the
/// command itself is at fault).
constexpr Status make_status(StatusType t, uint8_t sc, bool dnr = true) {
  return Status{static_cast<uint16_t>((static_cast<uint16_t>(t) << 8) | sc |
                                      (dnr ? Status::kDnr : 0))};
}
inline constexpr Status kSuccess{};

// Generic Command Status (SCT 0), §4.6.1.2.1.
inline constexpr Status kInvalidOpcode = make_status(StatusType::kGeneric, 0x01);
inline constexpr Status kInvalidField = make_status(StatusType::kGeneric, 0x02);
inline constexpr Status kCommandIdConflict = make_status(StatusType::kGeneric, 0x03);
inline constexpr Status kDataTransferError = make_status(StatusType::kGeneric, 0x04);
inline constexpr Status kInternalError = make_status(StatusType::kGeneric, 0x06);
inline constexpr Status kAbortRequested = make_status(StatusType::kGeneric, 0x07);
inline constexpr Status kAbortSqDeleted = make_status(StatusType::kGeneric, 0x08);
inline constexpr Status kInvalidNamespace = make_status(StatusType::kGeneric, 0x0B);
inline constexpr Status kCommandSequenceError = make_status(StatusType::kGeneric, 0x0C);
inline constexpr Status kSglDescriptorTypeInvalid = make_status(StatusType::kGeneric, 0x11);
inline constexpr Status kPrpOffsetInvalid = make_status(StatusType::kGeneric, 0x13);
inline constexpr Status kLbaOutOfRange = make_status(StatusType::kGeneric, 0x80);
inline constexpr Status kCapacityExceeded = make_status(StatusType::kGeneric, 0x81);
// Command Specific Status (SCT 1), §4.6.1.2.2 and §5.
inline constexpr Status kCompletionQueueInvalid = make_status(StatusType::kCommandSpecific, 0x00);
inline constexpr Status kInvalidQueueIdentifier = make_status(StatusType::kCommandSpecific, 0x01);
inline constexpr Status kInvalidQueueSize = make_status(StatusType::kCommandSpecific, 0x02);
inline constexpr Status kAbortCommandLimitExceeded =
    make_status(StatusType::kCommandSpecific, 0x03);
inline constexpr Status kAsyncEventLimitExceeded = make_status(StatusType::kCommandSpecific, 0x05);
inline constexpr Status kInvalidInterruptVector = make_status(StatusType::kCommandSpecific, 0x08);
inline constexpr Status kInvalidLogPage = make_status(StatusType::kCommandSpecific, 0x09);
inline constexpr Status kInvalidQueueDeletion = make_status(StatusType::kCommandSpecific, 0x0C);
inline constexpr Status kFeatureNotSaveable = make_status(StatusType::kCommandSpecific, 0x0D);
inline constexpr Status kFeatureNotChangeable = make_status(StatusType::kCommandSpecific, 0x0E);
inline constexpr Status kWriteToReadOnly = make_status(StatusType::kCommandSpecific, 0x82);
// Media and Data Integrity Errors (SCT 2), §4.6.1.2.3.
inline constexpr Status kWriteFault = make_status(StatusType::kMediaError, 0x80);
inline constexpr Status kUnrecoveredReadError = make_status(StatusType::kMediaError, 0x81);

// ---- Admin command opcodes (§5) ----
enum AdminOpcode : uint8_t {
  kAdminDeleteIoSq = 0x00,
  kAdminCreateIoSq = 0x01,
  kAdminGetLogPage = 0x02,
  kAdminDeleteIoCq = 0x04,
  kAdminCreateIoCq = 0x05,
  kAdminIdentify = 0x06,
  kAdminAbort = 0x08,
  kAdminSetFeatures = 0x09,
  kAdminGetFeatures = 0x0A,
  kAdminAsyncEventRequest = 0x0C,
  kAdminKeepAlive = 0x18,
  kAdminDoorbellBufferConfig = 0x7C,
};

// ---- NVM command set I/O opcodes (§6) ----
enum IoOpcode : uint8_t {
  kIoFlush = 0x00,
  kIoWrite = 0x01,
  kIoRead = 0x02,
  kIoWriteZeroes = 0x08,
  kIoDatasetManagement = 0x09,
};

// Read / Write / Write Zeroes (§6.9, §6.15, §6.16): CDW10-11 SLBA, CDW12 NLB 15:0 (0's based),
// DEAC bit 25 (Write Zeroes), FUA bit 30, LR bit 31.
inline constexpr uint32_t kCdw12NlbMask = 0xFFFF;
inline constexpr uint32_t kCdw12Deac = 1u << 25;
inline constexpr uint32_t kCdw12Fua = 1u << 30;
// Dataset Management (§6.7): CDW10 NR 7:0 (0's based ranges), CDW11 AD bit 2 (deallocate).
inline constexpr uint32_t kDsmAttrDeallocate = 1u << 2;
/// One Dataset Management range (Figure 364): 16 bytes.
struct DsmRange {
  uint32_t context_attributes;
  uint32_t nlb;   ///< Length in logical blocks (not 0's based).
  uint64_t slba;  ///< Starting LBA.
};
static_assert(sizeof(DsmRange) == 16);
inline constexpr unsigned kDsmMaxRanges = 256;

// ---- Identify (§5.15) ----
inline constexpr uint32_t kIdentifyBytes = 4096;
enum IdentifyCns : uint8_t {
  kCnsNamespace = 0x00,
  kCnsController = 0x01,
  kCnsActiveNamespaceList = 0x02,
  kCnsNamespaceDescriptorList = 0x03,
};
// Identify Controller byte offsets (Figure 247).
inline constexpr size_t kIdCtrlVid = 0, kIdCtrlSsvid = 2, kIdCtrlSn = 4, kIdCtrlMn = 24,
                        kIdCtrlFr = 64, kIdCtrlRab = 72, kIdCtrlIeee = 73, kIdCtrlMdts = 77,
                        kIdCtrlCntlid = 78, kIdCtrlVer = 80, kIdCtrlOaes = 92, kIdCtrlCntrltype = 111,
                        kIdCtrlOacs = 256, kIdCtrlAcl = 258, kIdCtrlAerl = 259, kIdCtrlFrmw = 260,
                        kIdCtrlLpa = 261, kIdCtrlElpe = 262, kIdCtrlWctemp = 266,
                        kIdCtrlCctemp = 268, kIdCtrlSqes = 512, kIdCtrlCqes = 513,
                        kIdCtrlMaxcmd = 514, kIdCtrlNn = 516, kIdCtrlOncs = 520, kIdCtrlVwc = 525,
                        kIdCtrlSgls = 536, kIdCtrlSubnqn = 768;
inline constexpr uint16_t kOacsDoorbellBufferConfig = 1u << 8;
inline constexpr uint16_t kOncsDsm = 1u << 2, kOncsWriteZeroes = 1u << 3;
// Identify Namespace byte offsets (Figure 249).
inline constexpr size_t kIdNsNsze = 0, kIdNsNcap = 8, kIdNsNuse = 16, kIdNsNsfeat = 24,
                        kIdNsNlbaf = 25, kIdNsFlbas = 26, kIdNsDlfeat = 33, kIdNsNguid = 104,
                        kIdNsEui64 = 120, kIdNsLbaf0 = 128;
/// Namespace Identification Descriptor type 3: UUID (16 bytes) (Figure 251).
inline constexpr uint8_t kNidtUuid = 3;

// ---- Features (§5.21.1) ----
enum FeatureId : uint8_t {
  kFeatArbitration = 0x01,
  kFeatPowerManagement = 0x02,
  kFeatTemperatureThreshold = 0x04,
  kFeatErrorRecovery = 0x05,
  kFeatVolatileWriteCache = 0x06,
  kFeatNumberOfQueues = 0x07,
  kFeatInterruptCoalescing = 0x08,
  kFeatInterruptVectorConfig = 0x09,
  kFeatWriteAtomicity = 0x0A,
  kFeatAsyncEventConfig = 0x0B,
  kFeatTimestamp = 0x0E,
};

// ---- Log pages (§5.14.1) ----
enum LogPageId : uint8_t {
  kLogError = 0x01,         ///< Error Information: 64 bytes per entry.
  kLogSmartHealth = 0x02,   ///< SMART / Health Information: 512 bytes.
  kLogFirmwareSlot = 0x03,  ///< Firmware Slot Information: 512 bytes.
};
inline constexpr uint32_t kLogErrorEntryBytes = 64;
inline constexpr uint32_t kLogSmartBytes = 512;
inline constexpr uint32_t kLogFirmwareSlotBytes = 512;

// ---- Asynchronous Event Request completion DW0 (§5.2, Figure 146) ----
/// Event type 2:0, event information 15:8, log page identifier 23:16.
constexpr uint32_t async_event_dw0(uint8_t type, uint8_t info, uint8_t log_page) {
  return uint32_t{type} | (uint32_t{info} << 8) | (uint32_t{log_page} << 16);
}
inline constexpr uint8_t kAerLimit = 4;  ///< AERL + 1: outstanding AERs the controller holds.

// ---- PCI identity (class 01:08:02, NVM Express I/O controller) ----
inline constexpr uint32_t kPciClassNvme = 0x010802;
/// Red Hat's QEMU NVMe IDs (1b36:0010), as QEMU's emulated nvme presents itself: every guest
/// driver binds to it by class code anyway.
inline constexpr uint16_t kPciVendorRedHat = 0x1b36, kPciDeviceNvme = 0x0010;

}  // namespace tern::nvme
