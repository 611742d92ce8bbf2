#include "nvme/nvme_identify.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace tern::nvme {

namespace {

// Identify Controller offsets nvme_spec.h does not name (Figure 247).
constexpr size_t kIdCtrlNpss = 263;     ///< Number of Power States Support, 0's based.
constexpr size_t kIdCtrlPsd0 = 2048;    ///< Power State 0 Descriptor (Figure 248), 32 bytes.
constexpr size_t kIdCtrlSubnqnBytes = 256;
// Identify Namespace offsets nvme_spec.h does not name (Figure 249).
constexpr size_t kIdNsNvmcap = 48;      ///< NVM Capacity in bytes, 128-bit.
constexpr size_t kIdNsNsattr = 99;      ///< Namespace Attributes: bit 0 write protected.
/// Namespace Identification Descriptor type 2: NGUID (16 bytes) (Figure 251).
constexpr uint8_t kNidtNguid = 2;

// LPA (Log Page Attributes): bit 2, extended data for Get Log Page (LPO, NUMDU).
constexpr uint8_t kLpaExtendedData = 1u << 2;
// FRMW: bit 0 slot 1 read only, bits 3:1 number of firmware slots.
constexpr uint8_t kFrmwSlot1ReadOnly = 1u << 0, kFrmwOneSlot = 1u << 1;
// VWC: bit 0 present; bits 2:1 = 11b, Flush with NSID FFFFFFFFh supported (1.4).
constexpr uint8_t kVwcPresent = 1u << 0, kVwcFlushBroadcast = 3u << 1;
constexpr uint8_t kCntrltypeIo = 1;
// DLFEAT: bits 2:0 = 001b deallocated blocks read as zeroes; bit 3 Write Zeroes may deallocate.
constexpr uint8_t kDlfeatReadZeroes = 1, kDlfeatWriteZeroesDeallocate = 1u << 3;

// Power state 0 (Figure 248): 25 W maximum (MP in 0.01 W units, MXPS 0), 16 µs entry latency,
// 4 µs exit latency, best relative read/write throughput and latency (0).
constexpr uint16_t kPs0MaxPowerCentiwatts = 2500;
constexpr uint32_t kPs0EntryLatencyUs = 16, kPs0ExitLatencyUs = 4;

// SMART / Health Information log offsets (§5.14.1.2).
constexpr size_t kSmartAvailableSpare = 3, kSmartSpareThreshold = 4, kSmartDataUnitsRead = 32,
                 kSmartDataUnitsWritten = 48, kSmartHostReads = 64, kSmartHostWrites = 80,
                 kSmartPowerOnHours = 128, kSmartMediaErrors = 160;
// Firmware Slot Information log (§5.14.1.3): AFI bits 2:0 the active slot; FRS1 at 8.
constexpr size_t kFwAfi = 0, kFwFrs1 = 8;

template <class T>
void put(std::span<uint8_t> page, size_t at, T v) {
  static_assert(std::is_unsigned_v<T>);
  for (size_t i = 0; i < sizeof(T); ++i) page[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

/// An ASCII string field (SN, MN, FR): `s` cut to `width` bytes, space-padded, every byte
/// outside printable ASCII replaced by a space (Linux prints these in sysfs).
void put_ascii(std::span<uint8_t> page, size_t at, size_t width, std::string_view s) {
  for (size_t i = 0; i < width; ++i) {
    uint8_t c = i < s.size() ? static_cast<uint8_t>(s[i]) : ' ';
    page[at + i] = (c >= 0x20 && c <= 0x7E) ? c : ' ';
  }
}

/// The serial as SN reports it, trailing padding removed (for the SUBNQN).
std::string serial_field(const ControllerInfo& c) {
  std::array<uint8_t, 20> sn;
  put_ascii(sn, 0, sn.size(), c.serial);
  std::string s(sn.begin(), sn.end());
  s.erase(s.find_last_not_of(' ') + 1);
  return s;
}

}  // namespace

std::array<uint8_t, kIdentifyBytes> identify_controller(const ControllerInfo& c) {
  std::array<uint8_t, kIdentifyBytes> id{};
  std::span<uint8_t> p(id);
  put<uint16_t>(p, kIdCtrlVid, kPciVendorRedHat);
  put<uint16_t>(p, kIdCtrlSsvid, kPciVendorRedHat);
  put_ascii(p, kIdCtrlSn, 20, c.serial);
  put_ascii(p, kIdCtrlMn, 40, c.model);
  put_ascii(p, kIdCtrlFr, 8, c.firmware);
  p[kIdCtrlMdts] = c.mdts;
  put<uint16_t>(p, kIdCtrlCntlid, 0);
  put<uint32_t>(p, kIdCtrlVer, kVersion14);
  p[kIdCtrlCntrltype] = kCntrltypeIo;

  put<uint16_t>(p, kIdCtrlOacs, kOacsDoorbellBufferConfig);
  p[kIdCtrlAcl] = 3;               // 0's based: four outstanding Aborts
  p[kIdCtrlAerl] = kAerLimit - 1;  // 0's based
  p[kIdCtrlFrmw] = kFrmwSlot1ReadOnly | kFrmwOneSlot;
  p[kIdCtrlLpa] = kLpaExtendedData;
  p[kIdCtrlElpe] = 0;              // 0's based: one Error Information entry
  p[kIdCtrlNpss] = 0;              // 0's based: one power state

  p[kIdCtrlSqes] = (kSqEntryShift << 4) | kSqEntryShift;  // required and maximum: 64 bytes
  p[kIdCtrlCqes] = (kCqEntryShift << 4) | kCqEntryShift;  // 16 bytes
  put<uint32_t>(p, kIdCtrlNn, 1);
  uint16_t oncs = kOncsWriteZeroes;
  if (c.ns.discard) oncs |= kOncsDsm;
  put<uint16_t>(p, kIdCtrlOncs, oncs);
  p[kIdCtrlVwc] = c.volatile_write_cache ? (kVwcPresent | kVwcFlushBroadcast) : 0;
  put<uint32_t>(p, kIdCtrlSgls, 0);

  std::string nqn = "nqn.2026-12.org.tern:nvme:" + serial_field(c);
  size_t n = std::min(nqn.size(), kIdCtrlSubnqnBytes - 1);  // NUL-terminated
  std::memcpy(p.data() + kIdCtrlSubnqn, nqn.data(), n);

  put<uint16_t>(p, kIdCtrlPsd0 + 0, kPs0MaxPowerCentiwatts);
  put<uint32_t>(p, kIdCtrlPsd0 + 4, kPs0EntryLatencyUs);
  put<uint32_t>(p, kIdCtrlPsd0 + 8, kPs0ExitLatencyUs);
  return id;
}

std::array<uint8_t, kIdentifyBytes> identify_namespace(const ControllerInfo& c) {
  std::array<uint8_t, kIdentifyBytes> id{};
  std::span<uint8_t> p(id);
  put<uint64_t>(p, kIdNsNsze, c.ns.size_lbas);
  put<uint64_t>(p, kIdNsNcap, c.ns.size_lbas);
  put<uint64_t>(p, kIdNsNuse, c.ns.size_lbas);
  p[kIdNsNsfeat] = 0;
  p[kIdNsNlbaf] = 0;  // 0's based: one LBA format
  p[kIdNsFlbas] = 0;  // format 0, no metadata
  p[kIdNsDlfeat] = kDlfeatReadZeroes | kDlfeatWriteZeroesDeallocate;
  // NVMCAP: the namespace in bytes (low 64 bits of the 128-bit field), when that fits.
  if (c.ns.lba_shift < 64 && c.ns.size_lbas <= (~uint64_t{0} >> c.ns.lba_shift))
    put<uint64_t>(p, kIdNsNvmcap, c.ns.size_lbas << c.ns.lba_shift);
  p[kIdNsNsattr] = c.ns.read_only ? 1 : 0;
  std::memcpy(p.data() + kIdNsNguid, c.nguid.data(), c.nguid.size());
  // LBA Format 0: MS 0, LBADS bits 23:16, RP 0 (best performance).
  put<uint32_t>(p, kIdNsLbaf0, (c.ns.lba_shift & 0xFF) << 16);
  return id;
}

std::array<uint8_t, kIdentifyBytes> identify_active_namespaces(uint32_t start_nsid) {
  std::array<uint8_t, kIdentifyBytes> id{};
  if (start_nsid < 1) put<uint32_t>(std::span<uint8_t>(id), 0, 1);
  return id;
}

std::array<uint8_t, kIdentifyBytes> identify_ns_descriptors(const ControllerInfo& c) {
  std::array<uint8_t, kIdentifyBytes> id{};
  id[0] = kNidtNguid;
  id[1] = static_cast<uint8_t>(c.nguid.size());  // NIDL
  std::memcpy(id.data() + 4, c.nguid.data(), c.nguid.size());
  return id;  // a zero NIDT/NIDL ends the list
}

tl::expected<std::vector<uint8_t>, Status> log_page(uint8_t lid, const ControllerInfo& c,
                                                    const HealthCounters& h) {
  switch (lid) {
    case kLogError:
      return std::vector<uint8_t>(kLogErrorEntryBytes, 0);
    case kLogSmartHealth: {
      std::vector<uint8_t> v(kLogSmartBytes, 0);
      std::span<uint8_t> p(v);
      // Critical warning and composite temperature 0; the 128-bit counters' high halves 0.
      p[kSmartAvailableSpare] = 100;
      p[kSmartSpareThreshold] = 10;
      put<uint64_t>(p, kSmartDataUnitsRead, h.data_units_read);
      put<uint64_t>(p, kSmartDataUnitsWritten, h.data_units_written);
      put<uint64_t>(p, kSmartHostReads, h.host_read_commands);
      put<uint64_t>(p, kSmartHostWrites, h.host_write_commands);
      put<uint64_t>(p, kSmartPowerOnHours, h.power_on_hours);
      put<uint64_t>(p, kSmartMediaErrors, h.media_errors);
      return v;
    }
    case kLogFirmwareSlot: {
      std::vector<uint8_t> v(kLogFirmwareSlotBytes, 0);
      v[kFwAfi] = 1;  // slot 1 active; next reset: no change (bits 6:4 0)
      put_ascii(std::span<uint8_t>(v), kFwFrs1, 8, c.firmware);
      return v;
    }
    default:
      return tl::unexpected(kInvalidLogPage);
  }
}

}  // namespace tern::nvme
