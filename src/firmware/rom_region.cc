#include "firmware/rom_region.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "base/log.h"

namespace tern {

namespace {

constexpr uint64_t kPage = 4096;

Result<void> check_rom_size(uint64_t size, const std::string& who) {
  if (size == 0) return fail(who, "is empty");
  if (size % kPage != 0)
    return fail(who, "size " + std::to_string(size) + " bytes is not a multiple of 4096");
  if (size > kMaxRomBytes)
    return fail(who, "size " + std::to_string(size) + " bytes exceeds the " +
                         std::to_string(kMaxRomBytes >> 20) +
                         " MiB below 4 GiB a firmware may use");
  return {};
}

/// Writes `size` bytes produced by `fill(dst, n, off)` into a new memfd, seals it and maps it
/// read-only.
template <class Fill>
Result<void> make_sealed(std::string_view name, uint64_t size, UniqueFd& fd,
                         std::unique_ptr<uint8_t, Unmapper>& mapping, Fill&& fill) {
  std::string n = "tern-rom-" + std::string(name.substr(0, 200));
  int raw = ::memfd_create(n.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (raw < 0) return fail_errno("memfd_create", n);
  fd.reset(raw);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return fail_errno("ftruncate", n);
  void* w = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (w == MAP_FAILED) return fail_errno("mmap", n);
  std::unique_ptr<uint8_t, Unmapper> writable(static_cast<uint8_t*>(w), Unmapper{size});
  TRY(fill(writable.get(), size));
  writable.reset();  // a writable shared mapping would block F_SEAL_WRITE
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return fail_errno("F_ADD_SEALS", n);
  void* r = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (r == MAP_FAILED) return fail_errno("mmap", n);
  mapping.reset(static_cast<uint8_t*>(r));
  mapping.get_deleter().len = size;
  return {};
}

}  // namespace

Result<RomRegion> RomRegion::from_file(const std::string& path, const std::string& field) {
  std::string who = field + " " + path;
  int raw = retry_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
  if (raw < 0) return fail_errno(field, path);
  UniqueFd src(raw);
  struct stat st {};
  if (::fstat(src.get(), &st) != 0) return fail_errno(field, path);
  if (S_ISDIR(st.st_mode)) return fail(who, "is a directory, not a firmware image");
  if (!S_ISREG(st.st_mode)) return fail(who, "is not a regular file");
  auto size = static_cast<uint64_t>(st.st_size);
  TRY(check_rom_size(size, who));
  RomRegion r;
  r.size_ = size;
  TRY(make_sealed(path.substr(path.rfind('/') + 1), size, r.fd_, r.mapping_,
                  [&](uint8_t* dst, uint64_t n) -> Result<void> {
                    uint64_t done = 0;
                    while (done < n) {
                      ssize_t got = retry_eintr([&] {
                        return ::pread(src.get(), dst + done, n - done, static_cast<off_t>(done));
                      });
                      if (got < 0) return fail_errno(field, "read " + path);
                      if (got == 0) return fail(who, "shrank while being read");
                      done += static_cast<uint64_t>(got);
                    }
                    return {};
                  }));
  return r;
}

Result<RomRegion> RomRegion::from_bytes(std::span<const uint8_t> bytes, std::string_view name) {
  TRY(check_rom_size(bytes.size(), std::string(name)));
  RomRegion r;
  r.size_ = bytes.size();
  TRY(make_sealed(name, r.size_, r.fd_, r.mapping_, [&](uint8_t* dst, uint64_t n) -> Result<void> {
    std::memcpy(dst, bytes.data(), n);
    return {};
  }));
  return r;
}

Result<void> RomRegion::map(KvmVm& vm, uint32_t slot, uint64_t gpa, uint64_t offset,
                            uint64_t size) const {
  if (gpa % kPage != 0 || offset % kPage != 0 || size % kPage != 0 || size == 0 || offset > size_ ||
      size > size_ - offset)
    return fail("map firmware image", "range offset " + std::to_string(offset) + " size " +
                                          std::to_string(size) + " does not fit the " +
                                          std::to_string(size_) + "-byte image in 4 KiB pages");
  TRY(require_readonly_mem(vm));
  return vm.set_user_memory_region(slot, gpa, size, mapping_.get() + offset, KVM_MEM_READONLY);
}

void RomWriteSink::read(uint64_t offset, std::span<uint8_t> data) {
  auto bytes = rom_.bytes();
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = offset + i < bytes.size() ? bytes[offset + i] : 0xFF;
}

void RomWriteSink::write(uint64_t offset, std::span<const uint8_t> data) {
  static RateLimit limit;
  uint64_t n = dropped_.fetch_add(1, std::memory_order_relaxed) + 1;
  TERN_LOG_RATELIMITED(limit, debug,
                       "{}: guest write of {} byte(s) at offset {:#x} dropped ({} so far)", name_,
                       data.size(), offset, n);
}

Result<void> require_readonly_mem(const KvmVm& vm) {
  if (vm.check_extension(KVM_CAP_READONLY_MEM) <= 0)
    return fail("KVM_CAP_READONLY_MEM",
                "this host's KVM cannot map read-only memory (needed for firmware images)");
  return {};
}

}  // namespace tern
