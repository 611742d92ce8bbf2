#include "kvm/kvm_stats.h"

#include <linux/kvm.h>
#include <sys/ioctl.h>

#include <cstring>

namespace tern {

namespace {

constexpr size_t kHeaderBytes = 24;     // 6 x u32
constexpr size_t kDescFixedBytes = 16;  // flags, exponent, size, offset, bucket_size
constexpr uint32_t kMaxNameSize = 4096;
constexpr uint32_t kMaxDescs = 65536;

uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Result<void> pread_exact(int fd, void* buf, size_t len, uint64_t off, const char* what) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = retry_eintr([&] {
      return ::pread(fd, static_cast<uint8_t*>(buf) + done, len - done,
                     static_cast<off_t>(off + done));
    });
    if (n < 0) return fail_errno("read KVM stats fd", what);
    if (n == 0) return fail("read KVM stats fd", std::string(what) + ": short read");
    done += static_cast<size_t>(n);
  }
  return {};
}

const char* type_name(uint32_t flags) {
  switch (flags & KVM_STATS_TYPE_MASK) {
    case KVM_STATS_TYPE_CUMULATIVE:
      return "cumulative";
    case KVM_STATS_TYPE_INSTANT:
      return "instant";
    case KVM_STATS_TYPE_PEAK:
      return "peak";
    case KVM_STATS_TYPE_LINEAR_HIST:
      return "linear_hist";
    case KVM_STATS_TYPE_LOG_HIST:
      return "log_hist";
    default:
      return "unknown";
  }
}

const char* unit_name(uint32_t flags) {
  switch (flags & KVM_STATS_UNIT_MASK) {
    case KVM_STATS_UNIT_NONE:
      return "none";
    case KVM_STATS_UNIT_BYTES:
      return "bytes";
    case KVM_STATS_UNIT_SECONDS:
      return "seconds";
    case KVM_STATS_UNIT_CYCLES:
      return "cycles";
    case KVM_STATS_UNIT_BOOLEAN:
      return "boolean";
    default:
      return "unknown";
  }
}

}  // namespace

Result<KvmStatsReader> KvmStatsReader::open(BorrowedFd vm_or_vcpu) {
  int fd = ::ioctl(vm_or_vcpu.get(), KVM_GET_STATS_FD, 0);
  if (fd < 0) return fail_errno("KVM_GET_STATS_FD");
  return from_fd(UniqueFd(fd));
}

Result<KvmStatsReader> KvmStatsReader::from_fd(UniqueFd stats_fd) {
  KvmStatsReader r;
  r.fd_ = std::move(stats_fd);
  uint8_t h[kHeaderBytes];
  TRY(pread_exact(r.fd_.get(), h, sizeof h, 0, "header"));
  const uint32_t name_size = u32_at(h + 4), num_desc = u32_at(h + 8), id_offset = u32_at(h + 12),
                 desc_offset = u32_at(h + 16), data_offset = u32_at(h + 20);
  if (name_size == 0 || name_size > kMaxNameSize || num_desc > kMaxDescs)
    return fail("KVM stats header", "name_size " + std::to_string(name_size) + ", num_desc " +
                                        std::to_string(num_desc));
  std::string id(name_size, '\0');
  TRY(pread_exact(r.fd_.get(), id.data(), name_size, id_offset, "id"));
  r.id_ = id.c_str();
  const size_t desc_bytes = kDescFixedBytes + name_size;
  std::vector<uint8_t> d(desc_bytes * num_desc);
  if (!d.empty()) TRY(pread_exact(r.fd_.get(), d.data(), d.size(), desc_offset, "descriptors"));
  r.data_offset_ = data_offset;
  uint64_t data_end = 0;
  for (uint32_t i = 0; i < num_desc; ++i) {
    const uint8_t* p = d.data() + i * desc_bytes;
    Desc desc{};
    desc.flags = u32_at(p);
    std::memcpy(&desc.exponent, p + 4, 2);
    std::memcpy(&desc.size, p + 6, 2);
    desc.offset = u32_at(p + 8);
    desc.bucket_size = u32_at(p + 12);
    desc.name.assign(reinterpret_cast<const char*>(p + kDescFixedBytes),
                     strnlen(reinterpret_cast<const char*>(p + kDescFixedBytes), name_size));
    uint64_t end = uint64_t{desc.offset} + uint64_t{desc.size} * sizeof(uint64_t);
    if (end > data_end) data_end = end;
    r.descs_.push_back(std::move(desc));
  }
  if (data_end > (uint64_t{1} << 24)) return fail("KVM stats descriptors", "data block too large");
  r.data_size_ = static_cast<uint32_t>(data_end);
  return r;
}

Result<std::vector<KvmStat>> KvmStatsReader::read() const {
  std::vector<uint8_t> data(data_size_);
  if (!data.empty()) TRY(pread_exact(fd_.get(), data.data(), data.size(), data_offset_, "data"));
  std::vector<KvmStat> out;
  out.reserve(descs_.size());
  for (const Desc& d : descs_) {
    KvmStat s;
    s.name = d.name;
    s.type = type_name(d.flags);
    s.unit = unit_name(d.flags);
    s.base = (d.flags & KVM_STATS_BASE_MASK) == KVM_STATS_BASE_POW2 ? 2 : 10;
    s.exponent = d.exponent;
    s.bucket_size = d.bucket_size;
    s.values.resize(d.size);
    if (d.size > 0) std::memcpy(s.values.data(), data.data() + d.offset, d.size * sizeof(uint64_t));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tern
