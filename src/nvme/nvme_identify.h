// The data structures the admin commands return (NVMe base spec 1.4): Identify Controller,
// Identify Namespace, the Active Namespace ID list and Namespace Identification Descriptors
// (§5.15), and the Error, SMART / Health and Firmware Slot log pages (§5.14.1). Pure functions of
// what the controller is; "honest zeros" where tern has nothing to report.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nvme/nvme_command.h"
#include "nvme/nvme_spec.h"

namespace tern::nvme {

/// What the controller reports about itself.
struct ControllerInfo {
  std::string serial;          ///< SN: the disk's serial (--disk serial), else "tern-<name>";
                               ///< ASCII, space-padded to 20 bytes.
  std::string model = "tern NVMe";  ///< MN, 40 bytes space-padded.
  std::string firmware = "1.0";     ///< FR, 8 bytes space-padded (tern's version major.minor).
  uint8_t mdts = 7;            ///< Max Data Transfer Size: 2^mdts minimum-size pages.
  uint16_t max_queue_entries = 1024;  ///< CAP.MQES + 1: the largest queue.
  uint16_t io_queues = 64;     ///< I/O queue pairs the controller grants at most.
  bool volatile_write_cache = true;  ///< VWC: false for cache=directsync (every write durable).
  NamespaceInfo ns;
  std::array<uint8_t, 16> nguid{};  ///< Namespace GUID: stable per image (derived from the
                                    ///< serial or the path), never all zeros.
};

/// Identify Controller (CNS 01h), 4096 bytes: VID/SSVID, SN, MN, FR, MDTS, CNTLID 0, VER 1.4,
/// OACS Doorbell Buffer Config, ACL 3, AERL kAerLimit - 1, LPA, ELPE 0, SQES 0x66, CQES 0x44,
/// NN 1, ONCS DSM (when ns.discard) + Write Zeroes, VWC, SGLS 0 (no SGLs), SUBNQN
/// "nqn.2026-12.org.tern:nvme:<serial>", one power state.
[[nodiscard]] std::array<uint8_t, kIdentifyBytes> identify_controller(const ControllerInfo& c);
/// Identify Namespace (CNS 00h) for NSID 1: NSZE = NCAP = NUSE = size_lbas, one LBA format
/// (LBADS = lba_shift), DLFEAT: deallocated blocks read as zeroes + Write Zeroes may deallocate,
/// NGUID.
[[nodiscard]] std::array<uint8_t, kIdentifyBytes> identify_namespace(const ControllerInfo& c);
/// Active Namespace ID list (CNS 02h) of NSIDs greater than `start_nsid`: [1] or empty.
[[nodiscard]] std::array<uint8_t, kIdentifyBytes> identify_active_namespaces(uint32_t start_nsid);
/// Namespace Identification Descriptor list (CNS 03h): the NGUID descriptor (type 2).
[[nodiscard]] std::array<uint8_t, kIdentifyBytes> identify_ns_descriptors(const ControllerInfo& c);

/// Counters the SMART / Health log reports (the rest are honest zeros).
struct HealthCounters {
  uint64_t data_units_read = 0;     ///< Thousands of 512-byte units, rounded up (§5.14.1.2).
  uint64_t data_units_written = 0;
  uint64_t host_read_commands = 0;
  uint64_t host_write_commands = 0;
  uint64_t media_errors = 0;        ///< Commands completed with a media error status.
  uint64_t power_on_hours = 0;
};
/// Log page `lid` as the controller holds it, or kInvalidLogPage for a page tern does not
/// have. Error Information: one all-zero entry (ELPE 0); SMART / Health: composite temperature
/// 0 (not reported), available spare 100%, the counters; Firmware Slot: slot 1 active, FR in
/// slot 1. The caller applies the offset (LPO) and length (NUMD) and zero-fills past the page.
[[nodiscard]] tl::expected<std::vector<uint8_t>, Status> log_page(uint8_t lid,
                                                                  const ControllerInfo& c,
                                                                  const HealthCounters& h);

}  // namespace tern::nvme
