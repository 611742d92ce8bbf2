// KvmStatsReader: KVM's in-kernel statistics of a VM or vCPU through the binary stats interface
// (KVM_GET_STATS_FD, KVM API doc section 4.133).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

/// One statistic's current value(s).
struct KvmStat {
  std::string name;  ///< e.g. "exits", "halt_exits", "remote_tlb_flush"
  /// "cumulative", "instant", "peak", "linear_hist" or "log_hist" (KVM_STATS_TYPE_*).
  std::string type;
  /// "none", "bytes", "seconds", "cycles" or "boolean" (KVM_STATS_UNIT_*).
  std::string unit;
  int base = 10;     ///< KVM_STATS_BASE_POW10 / POW2: value is values[i] * base^exponent units
  int exponent = 0;  ///< e.g. -9 with unit seconds: values are ns
  uint32_t bucket_size = 0;      ///< linear histograms: width of each bucket
  std::vector<uint64_t> values;  ///< one value, or the histogram's buckets
};

/// Reads a KVM stats fd. The header and descriptors are read once at open; read() preads the data
/// block each time, so one reader may be used from any thread (reads never share a file offset).
///
/// Layout (never from sizeof of <linux/kvm.h> structs, whose flexible arrays Debian 12's headers
/// mis-declare in C++, see kvm_abi.h): a 24-byte header {flags, name_size, num_desc, id_offset,
/// desc_offset, data_offset} (u32 each); at id_offset the id string (name_size bytes); at
/// desc_offset num_desc descriptors of 16 + name_size bytes each: {u32 flags, s16 exponent,
/// u16 size, u32 offset, u32 bucket_size, char name[name_size]}; a descriptor's `size` u64 values
/// are at data_offset + offset.
class KvmStatsReader {
 public:
  /// KVM_GET_STATS_FD on a VM or vCPU fd, then parses the descriptors.
  [[nodiscard]] static Result<KvmStatsReader> open(BorrowedFd vm_or_vcpu);
  /// Parses an already-open stats fd (tests use a memfd holding a hand-built block).
  [[nodiscard]] static Result<KvmStatsReader> from_fd(UniqueFd stats_fd);

  /// "kvm-<pid>" for a VM, "kvm-<pid>/vcpu-<n>" for a vCPU.
  [[nodiscard]] const std::string& id() const { return id_; }
  /// Number of statistics described.
  [[nodiscard]] size_t size() const { return descs_.size(); }
  /// Current values of every statistic, in descriptor order.
  [[nodiscard]] Result<std::vector<KvmStat>> read() const;

 private:
  struct Desc {
    std::string name;
    uint32_t flags;
    int16_t exponent;
    uint16_t size;
    uint32_t offset;
    uint32_t bucket_size;
  };
  KvmStatsReader() = default;

  UniqueFd fd_;
  std::string id_;
  uint32_t data_offset_ = 0;
  uint32_t data_size_ = 0;  ///< bytes from data_offset_ covering every descriptor's values
  std::vector<Desc> descs_;
};

}  // namespace tern
