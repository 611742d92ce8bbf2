#include "vmm/boot_inputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "arch/x86/cmdline.h"
#include "arch/x86/kernel_payload.h"
#include "arch/x86/layout.h"
#include "arch/x86/linux_placement.h"
#include "arch/x86/pvh.h"
#include "base/checked.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/size.h"
#include "firmware/pflash/vars_file.h"
#include "vmm/devices/device_registry.h"
#include "vmm/host_check.h"

namespace tern {

namespace {

constexpr size_t kMaxKernelBytes = 512 * MiB;
constexpr size_t kMaxInitrdBytes = 3 * GiB;  // must fit below the 32-bit hole anyway
/// Largest vmlinux a bzImage payload may decompress to, whatever the guest's RAM.
constexpr size_t kMaxDecompressedKernelBytes = 512 * MiB;

/// The whole regular file at `path` in a HostBuffer (bytes; `limit` guards against huge inputs).
Result<HostBuffer> read_to_buffer(const std::string& path, size_t limit, const char* field) {
  // O_NONBLOCK: opening a FIFO without a writer would wait for one (for ever: SIGTERM is taken
  // by tern's signalfd, not by the open); it is refused below as not a regular file. A regular
  // file's reads ignore the flag.
  auto fd = open_file(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (!fd) return fail(field, fd.error().message());
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return fail(field, Error{"fstat", path, errno}.message());
  if (!S_ISREG(st.st_mode)) return fail(field, "open: " + path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limit)
    return fail(field,
                "open: " + path + ": file too large (" + std::to_string(st.st_size) + " bytes)");
  auto buf = HostBuffer::allocate(static_cast<size_t>(st.st_size));
  if (!buf) return fail(field, path + ": " + buf.error().message());
  size_t done = 0;
  std::span<uint8_t> out = buf->bytes();
  while (done < out.size()) {
    ssize_t n = ::read(fd->get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(field, Error{"read", path, errno}.message());
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  buf->shrink(done);
  return std::move(*buf);
}

/// An error about the kernel file: "--kernel PATH: what".
tl::unexpected<Error> kernel_error(const VmConfig& c, const std::string& what) {
  return fail("--kernel", c.kernel_path + ": " + what);
}

/// Errors from plan_pvh() under the option they concern.
tl::unexpected<Error> pvh_plan_error(const VmConfig& c, const Error& e) {
  if (e.op == "guest memory")
    return fail("--memory", "kernel " + c.kernel_path + ": " + e.message());
  if (e.op == "initrd") return fail("--initrd", e.message());
  if (e.op == "kernel command line") return fail("--cmdline", e.message());
  return kernel_error(c, e.message());
}

constexpr const char* kNoPvhNote = "no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY)";

/// The kernel for kPvh from a bzImage `file`: its payload decompressed on the host and parsed.
/// An error says what failed (the caller refuses it).
Result<void> pvh_from_bzimage(const x86::BzImage& bz, std::span<const uint8_t> file,
                              uint64_t ram_bytes, BootInputs& in) {
  ASSIGN_OR_RETURN(std::span<const uint8_t> payload, x86::bzimage_compressed_payload(bz, file));
  auto format = x86::detect_payload_compression(payload);
  std::string name(x86::payload_compression_name(format));
  auto elf = x86::decompress_payload(payload, max_decompressed_kernel_bytes(ram_bytes));
  if (!elf) {
    std::string why = elf.error().message();
    if (why.find("exceeds the limit") != std::string::npos)
      why +=
          " (the limit is the guest's RAM below 3 GiB, at most 512 MiB: a vmlinux's segments "
          "must fit there)";
    return fail("payload (" + name + ") does not decompress", why);
  }
  auto parsed = x86::parse_elf_kernel(elf->bytes());
  if (!parsed)
    return fail("payload (" + name + ") is not a usable vmlinux", parsed.error().message());
  if (!parsed->pvh_entry) return fail("payload (" + name + ")", kNoPvhNote);
  in.elf = std::move(*parsed);
  in.elf_image = std::move(*elf);
  in.protocol_reason = "payload (" + name +
                       ") decompressed on the host: " + std::to_string(in.elf_image.size() >> 20) +
                       " MiB vmlinux";
  return {};
}

/// Reads and parses the kernel for the protocol `c.boot_protocol` asks for; sets in.protocol.
Result<void> prepare_kernel(const VmConfig& c, BootInputs& in) {
  // The file lives in its own mapping only until this returns: what the VM needs is moved out
  // (the vmlinux bytes) or copied (a bzImage's payload, by parse_bzimage).
  ASSIGN_OR_RETURN(HostBuffer file, read_to_buffer(c.kernel_path, kMaxKernelBytes, "--kernel"));
  if (x86::looks_like_elf(file.bytes())) {
    if (c.boot_protocol == BootProtocol::kBzImage)
      return kernel_error(c,
                          "an ELF vmlinux cannot be booted with --boot-protocol bzimage (use "
                          "pvh, or the kernel's bzImage)");
    auto elf = x86::parse_elf_kernel(file.bytes());
    if (!elf) return kernel_error(c, elf.error().message());
    if (!elf->pvh_entry)
      return kernel_error(c, std::string(kNoPvhNote) +
                                 "; boot the kernel's bzImage with --boot-protocol bzimage or use "
                                 "a kernel built with CONFIG_PVH=y");
    in.elf = std::move(*elf);
    in.elf_image = std::move(file);
    in.protocol = BootProtocol::kPvh;
    in.protocol_reason = "ELF vmlinux";
    return {};
  }
  auto bz = x86::parse_bzimage(file.bytes());
  if (!bz)
    return kernel_error(c, "neither an ELF vmlinux nor a usable bzImage: " + bz.error().message());
  // Without decompressing (auto, bzimage), a payload whose magic is no format Linux builds is
  // refused here: the guest's own decompressor would halt silently without an early console.
  if (c.boot_protocol != BootProtocol::kPvh) {
    // (A bzImage that records no payload, as old or synthetic ones, is left to the guest.)
    auto payload = x86::bzimage_compressed_payload(*bz, file.bytes());
    if (payload && x86::detect_payload_compression(*payload) == x86::PayloadCompression::kUnknown)
      return kernel_error(c,
                          "the compressed kernel at payload_offset has no known compression "
                          "magic (gzip, xz, zstd, lz4, bzip2, lzma, lzo): a corrupt bzImage");
  }
  // auto boots a bzImage through its own entry: in the benchmark (docs/boot.md) host-side
  // decompression + PVH saved no measurable time, and the bzImage path keeps KASLR.
  if (c.boot_protocol == BootProtocol::kPvh) {
    auto pvh = pvh_from_bzimage(*bz, file.bytes(), c.memory_bytes, in);
    if (pvh) {
      bz->payload.clear();
      bz->payload.shrink_to_fit();  // not needed on the PVH path: free it now
      in.kernel = std::move(*bz);
      in.protocol = BootProtocol::kPvh;
      return {};
    }
    std::string why = pvh.error().message();
    if (why.find(kNoPvhNote) != std::string::npos)
      why += "; boot it with --boot-protocol bzimage or use a kernel built with CONFIG_PVH=y";
    return kernel_error(c, why);
  }
  in.protocol_reason = c.boot_protocol == BootProtocol::kBzImage
                           ? "--boot-protocol bzimage"
                           : "auto: a bzImage boots through its own entry (KASLR kept; "
                             "--boot-protocol pvh decompresses it on the host)";
  in.kernel = std::move(*bz);
  in.protocol = BootProtocol::kBzImage;
  return {};
}

}  // namespace

Result<void> prepare_firmware(const VmConfig& c, BootInputs& in) {
  const std::string& path = *c.firmware_path;
  ASSIGN_OR_RETURN(in.firmware,
                   read_to_buffer(path, firmware::kMaxFirmwareBytes + 1, "--firmware"));
  auto info = firmware::check_firmware_image(in.firmware.bytes());
  if (!info) return fail("--firmware", path + ": " + info.error().message());
  in.firmware_info = *info;
  if (!c.firmware_vars_path) return {};
  if (info->kind != firmware::FirmwareKind::kUefi)
    return fail("--firmware-vars", "needs a UEFI --firmware (" + path +
                                       " is a BIOS: it keeps no variable store)");
  // The store goes in the firmware area below the image; a 16 MiB image leaves no room (and
  // max_size 0 would mean "no limit" to VarsFile::open).
  if (info->size >= firmware::kMaxFirmwareBytes)
    return fail("--firmware-vars", path + " fills the whole 16 MiB firmware area below 4 GiB: "
                                          "there is no room for a variable store below it");
  // tern writes the store back: it must not be the code image (or a hard link to it).
  struct stat code_st {}, vars_st {};
  if (::stat(path.c_str(), &code_st) == 0 &&
      ::stat(c.firmware_vars_path->c_str(), &vars_st) == 0 && code_st.st_dev == vars_st.st_dev &&
      code_st.st_ino == vars_st.st_ino)
    return fail("--firmware-vars", *c.firmware_vars_path + " is the same file as --firmware (" +
                                       path + "): tern would write the variables into the code "
                                       "image");
  // Opened (created from the template when missing) and locked now, before the VM exists:
  // a bad store is refused naming the field and nothing runs.
  VarsFileSpec spec;
  spec.path = *c.firmware_vars_path;
  spec.template_path = firmware::vars_template_for(path);
  spec.max_size = firmware::kMaxFirmwareBytes - info->size;
  auto vars = VarsFile::open(spec);
  if (!vars) {
    // VarsFile names its field ("firmware-vars: PATH: ..."); the CLI's name replaces it.
    std::string m = vars.error().message();
    if (m.rfind("firmware-vars: ", 0) == 0) m.erase(0, 15);
    return fail("--firmware-vars", m);
  }
  in.firmware_vars = std::make_shared<VarsFile>(std::move(*vars));
  return {};
}

uint64_t max_decompressed_kernel_bytes(uint64_t ram_bytes) {
  return std::min<uint64_t>(kMaxDecompressedKernelBytes, std::min(ram_bytes, x86::kHoleStart));
}

Result<BootInputs> prepare_boot(const VmConfig& c) {
  BootInputs in;
  in.config = c;
  if (c.vcpus == 0 || c.vcpus > kMaxVcpus)
    return fail("--cpus", std::to_string(c.vcpus) + " is out of range (1.." +
                              std::to_string(kMaxVcpus) + ")");
  if (c.memory_bytes % (4 * KiB) != 0)
    return fail("--memory", format_size(c.memory_bytes) + " is not a multiple of 4 KiB");
  uint64_t limit = host_memory_limit();
  if (c.memory_bytes > limit)
    return fail("--memory", format_size(c.memory_bytes) + " is more than this host can back (" +
                                format_size(limit) + " of RAM + swap)");
  ASSIGN_OR_RETURN(MemoryBackend backend,
                   choose_memory_backend(c.memory_backend, c.devices, "--memory-backend"));
  if (backend == MemoryBackend::kHugetlbfs && c.memory_bytes % kHugePageSize != 0)
    return fail("--memory-backend hugetlbfs",
                "--memory " + format_size(c.memory_bytes) + " is not a multiple of 2 MiB");
  auto console = ConsoleTarget::parse(c.console, "--console");
  if (!console) return tl::unexpected(console.error());
  in.console = *console;

  if (c.firmware_path) {
    // The firmware loads its bootloader from the disks: no kernel, initrd or command line.
    TRY(prepare_firmware(c, in));
    // A firmware guest reboots through its firmware (installers, GRUB, systemctl reboot): in
    // place by default, as QEMU (docs/lifecycle.md "Reboot in place").
    in.default_on_reboot = OnReboot::kRestart;
    ASSIGN_OR_RETURN(in.devices, make_devices(c.devices));
    return in;
  }
  if (c.kernel_path.empty()) return fail("--kernel", "no kernel image given");
  TRY(prepare_kernel(c, in));

  if (c.initrd_path) {
    ASSIGN_OR_RETURN(in.initrd, read_to_buffer(*c.initrd_path, kMaxInitrdBytes, "--initrd"));
    if (in.initrd.size() == 0) return fail("--initrd", *c.initrd_path + ": file is empty");
  }

  if (in.protocol == BootProtocol::kPvh) {
    auto plan =
        x86::plan_pvh(in.elf, in.elf_image.size(), c.memory_bytes, c.cmdline, in.initrd.size());
    if (!plan) return pvh_plan_error(c, plan.error());
  } else {
    if (auto ok = x86::validate_cmdline(c.cmdline, in.kernel.cmdline_size); !ok)
      return fail("--cmdline", ok.error().message());
    auto footprint = x86::kernel_footprint(in.kernel, x86::kHimemStart);
    if (!footprint) return fail("--kernel", footprint.error().message());
    if (auto ok = x86::check_low_ram(*footprint, in.initrd.size(), c.memory_bytes); !ok)
      return fail("--memory", ok.error().message());
    if (in.initrd.size() != 0) {
      auto at = x86::place_initrd(in.initrd.size(), footprint->end, in.kernel.initrd_addr_max,
                                  c.memory_bytes);
      if (!at) return fail("--initrd", at.error().message());
    }
  }
  ASSIGN_OR_RETURN(in.devices, make_devices(c.devices));
  return in;
}

}  // namespace tern
