// `tern run` with bad user input: each case exits with status 1 and one message naming the field,
// before KVM is touched (on a host without VMX/SVM a *valid* configuration reaches the host check
// and exits 2 instead, which proves validation came first).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "arch/x86/bzimage_fake.h"
#include "arch/x86/elf_fake.h"

extern char** environ;

namespace tern {
namespace {

namespace fs = std::filesystem;
using x86::testing::FakeKernel;
using x86::testing::make_fake_bzimage;

struct RunResult {
  int status = -1;
  std::string err;
};

/// Runs the tern binary with `args`, stdin from /dev/null; returns exit status and stderr.
RunResult run_tern(const std::vector<std::string>& args) {
  std::string err_path =
      (fs::temp_directory_path() / ("tern-cli-" + std::to_string(getpid()))).string();
  std::vector<char*> argv;
  std::string bin = TERN_BINARY_PATH;
  argv.push_back(bin.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  RunResult r;
  if (posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ) != 0) return r;
  posix_spawn_file_actions_destroy(&fa);
  int ws = 0;
  waitpid(pid, &ws, 0);
  r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  std::ifstream in(err_path);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(err_path);
  return r;
}

class RunBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tern-cli-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    kernel_ = write("bzImage", make_fake_bzimage());
    initrd_ = write("initrd", std::vector<uint8_t>(64 * 1024, 0x42));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    auto p = dir_ / name;
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
  /// Expects status 1 and a single-line message containing every one of `needles`.
  void expect_rejected(std::vector<std::string> args, std::vector<std::string> needles) {
    args.insert(args.begin(), "run");
    RunResult r = run_tern(args);
    EXPECT_EQ(r.status, 1) << r.err;
    for (const auto& n : needles)
      EXPECT_NE(r.err.find(n), std::string::npos) << "want '" << n << "' in: " << r.err;
    EXPECT_EQ(r.err.find("guest stopped"), std::string::npos) << r.err;
  }

  fs::path dir_;
  std::string kernel_;
  std::string initrd_;
};

TEST_F(RunBadInput, MissingKernel) {
  expect_rejected({"--kernel", (dir_ / "nope").string()}, {"--kernel", "No such file"});
}

TEST_F(RunBadInput, KernelIsADirectory) {
  expect_rejected({"--kernel", dir_.string()}, {"--kernel", "not a regular file"});
}

// A FIFO nobody writes (a path typo into a named pipe): refused, not a wait in open(2) that
// SIGTERM cannot end (tern takes SIGTERM through a signalfd).
TEST_F(RunBadInput, KernelFirmwareInitrdOrConfigIsAFifo) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_rejected({"--kernel", fifo}, {"--kernel", "not a regular file"});
  auto fw = run_tern({"run", "--firmware", fifo});
  EXPECT_EQ(fw.status, 1) << fw.err;
  EXPECT_NE(fw.err.find("--firmware: open: " + fifo + ": not a regular file"), std::string::npos)
      << fw.err;
  auto cfg = run_tern({"--config-file", fifo});
  EXPECT_EQ(cfg.status, 1) << cfg.err;
  EXPECT_NE(cfg.err.find("not a regular file"), std::string::npos) << cfg.err;
}

TEST_F(RunBadInput, KernelNotABzImage) {
  auto junk = write("junk", std::vector<uint8_t>(8192, 0x90));
  expect_rejected({"--kernel", junk}, {"--kernel", "not a bzImage"});
}

TEST_F(RunBadInput, TruncatedKernel) {
  auto image = make_fake_bzimage();
  image.resize(0x300);
  expect_rejected({"--kernel", write("short", image)}, {"--kernel", "truncated"});
}

TEST_F(RunBadInput, OldBootProtocol) {
  FakeKernel k;
  k.version = 0x020A;
  expect_rejected({"--kernel", write("old", make_fake_bzimage(k))}, {"--kernel", "2.10"});
}

TEST_F(RunBadInput, MalformedElfKernel) {
  auto elf = x86::testing::make_fake_elf();
  // Program header 1 (the PT_LOAD): p_filesz reaching past the end of the file.
  x86::testing::poke_elf<uint64_t>(
      elf, x86::testing::kFakeElfPhoff + x86::testing::kFakePhdrSize + 32, elf.size());
  auto path = write("vmlinux-bad", elf);
  expect_rejected({"--kernel", path}, {"--kernel: " + path +
                                       ": ELF kernel: program header 1: file range past the end "
                                       "of the file"});
}

TEST_F(RunBadInput, ElfKernelWithoutPvhNote) {
  x86::testing::FakeElf e;
  e.pvh_entry.reset();
  auto path = write("vmlinux-nopvh", x86::testing::make_fake_elf(e));
  for (const char* protocol : {"pvh", "auto"})
    expect_rejected(
        {"--kernel", path, "--boot-protocol", protocol},
        {"--kernel: " + path + ": no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY)", "CONFIG_PVH=y"});
}

TEST_F(RunBadInput, ElfKernelWithBzImageProtocol) {
  auto path = write("vmlinux", x86::testing::make_fake_elf());
  expect_rejected({"--kernel", path, "--boot-protocol", "bzimage"},
                  {"--kernel: " + path +
                   ": an ELF vmlinux cannot be booted with --boot-protocol "
                   "bzimage"});
}

TEST_F(RunBadInput, BzImagePayloadDoesNotDecompress) {
  // A bzImage whose payload_offset/payload_length name an LZ4 (legacy frame) stream with a corrupt
  // block, followed by the decompressed size as the kernel's size_append writes it.
  FakeKernel k;
  auto image = make_fake_bzimage(k);
  const size_t pm = (size_t{k.setup_sects} + 1) * 512;
  std::vector<uint8_t> payload = {0x02, 0x21, 0x4c, 0x18,
                                  0x00, 0x01, 0x00, 0x00};  // 256-byte block
  payload.insert(payload.end(), 256, 0xff);
  for (uint8_t b : {0x00, 0x00, 0x10, 0x00}) payload.push_back(b);  // 1 MiB decompressed
  std::copy(payload.begin(), payload.end(), image.begin() + static_cast<long>(pm) + 0x40);
  x86::testing::poke<uint32_t>(image, 0x248, 0x40);
  x86::testing::poke<uint32_t>(image, 0x24C, static_cast<uint32_t>(payload.size()));
  auto path = write("vmlinuz-corrupt", image);
  expect_rejected({"--kernel", path, "--boot-protocol", "pvh"},
                  {"--kernel: " + path + ": payload (lz4) does not decompress"});
}

// A bzImage whose payload has no known compression magic (here zeroed) is refused under auto and
// bzimage too, without decompressing anything: the guest's decompressor would halt silently.
TEST_F(RunBadInput, BzImagePayloadWithoutKnownMagic) {
  FakeKernel k;
  auto image = make_fake_bzimage(k);
  x86::testing::poke<uint32_t>(image, 0x248, 0x40);
  x86::testing::poke<uint32_t>(image, 0x24C, 64);
  auto path = write("vmlinuz-zeroed", image);
  for (const char* protocol : {"auto", "bzimage"})
    expect_rejected({"--kernel", path, "--boot-protocol", protocol},
                    {"--kernel: " + path +
                     ": the compressed kernel at payload_offset has no known "
                     "compression magic"});
}

// A small payload claiming a vmlinux bigger than the guest's RAM is refused before tern allocates
// or touches the output (a gzip/zstd bomb cannot make tern use more than the guest's RAM).
TEST_F(RunBadInput, BzImagePayloadLargerThanGuestRam) {
  FakeKernel k;
  auto image = make_fake_bzimage(k);
  const size_t pm = (size_t{k.setup_sects} + 1) * 512;
  std::vector<uint8_t> payload = {0x1f, 0x8b, 0x08, 0x00};  // gzip magic, deflate
  payload.insert(payload.end(), 60, 0);
  for (uint8_t b : {0x00, 0x00, 0x00, 0x13}) payload.push_back(b);  // 304 MiB decompressed
  std::copy(payload.begin(), payload.end(), image.begin() + static_cast<long>(pm) + 0x40);
  x86::testing::poke<uint32_t>(image, 0x248, 0x40);
  x86::testing::poke<uint32_t>(image, 0x24C, static_cast<uint32_t>(payload.size()));
  auto path = write("vmlinuz-bomb", image);
  expect_rejected({"--kernel", path, "--boot-protocol", "pvh", "--memory", "256M"},
                  {"--kernel: " + path + ": payload (gzip) does not decompress",
                   "decompressed size 318767104 bytes exceeds the limit of 268435456 bytes",
                   "the guest's RAM below 3 GiB"});
}

TEST_F(RunBadInput, ElfSegmentIntoThe32BitHole) {
  x86::testing::FakeElf e;
  e.segments[0].memsz = uint64_t{1} << 40;  // at 16 MiB: a TiB of bss
  auto path = write("vmlinux-huge-bss", x86::testing::make_fake_elf(e));
  for (const char* mem : {"256M", "1G"})
    expect_rejected({"--kernel", path, "--memory", mem},
                    {"--kernel: " + path +
                     ": PVH kernel: segment [0x1000000, 0x10001000000) ends "
                     "above 3 GiB"});
}

TEST_F(RunBadInput, ElfKernelNeedsMoreRam) {
  auto path = write("vmlinux", x86::testing::make_fake_elf());
  expect_rejected({"--kernel", path, "--memory", "16M"},
                  {"--memory: kernel " + path + ": guest memory:", "needs 17 MiB of RAM"});
}

// A config file's boot-source fails like PUT /boot-source + InstanceStart: the message names the
// file's fields (boot-source.kernel_image_path, machine-config.mem_size_mib), not run's options.
TEST_F(RunBadInput, ConfigFileKernelErrorsNameTheFileFields) {
  auto elf = write("vmlinux", x86::testing::make_fake_elf());
  const auto cfg = (dir_ / "vm.json").string();
  auto run_config = [&](const std::string& protocol, int mib) {
    std::ofstream(cfg) << R"({"boot-source": {"kernel_image_path": ")" << elf
                       << R"(", "boot_protocol": ")" << protocol
                       << R"("}, "machine-config": {"vcpu_count": 1, "mem_size_mib": )" << mib
                       << "}}";
    return run_tern({"--config-file", cfg});
  };
  RunResult r = run_config("bzimage", 64);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("--config-file " + cfg + ": boot-source.kernel_image_path: " + elf +
                       ": an ELF vmlinux cannot be booted"),
            std::string::npos)
      << r.err;
  r = run_config("pvh", 8);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("--config-file " + cfg + ": machine-config.mem_size_mib: kernel " + elf),
            std::string::npos)
      << r.err;
}

TEST_F(RunBadInput, BadBootProtocol) {
  expect_rejected({"--kernel", kernel_, "--boot-protocol", "multiboot"},
                  {"--boot-protocol", "\"multiboot\" is not one of auto, pvh, bzimage"});
}

// --cpu-affinity: refused before anything runs, naming the class (docs/host-tuning.md).
TEST_F(RunBadInput, BadCpuAffinity) {
  expect_rejected({"--kernel", kernel_, "--cpu-affinity", "vcpu0=1-0"},
                  {"--cpu-affinity vcpu0: \"1-0\": a range ends below its start"});
  expect_rejected({"--kernel", kernel_, "--cpus", "2", "--cpu-affinity", "vcpu2=0"},
                  {"--cpu-affinity vcpu2: the VM has 2 vCPUs (vcpu0..vcpu1)"});
  expect_rejected({"--kernel", kernel_, "--cpu-affinity", "io=0,io=0"},
                  {"--cpu-affinity io: given more than once"});
  expect_rejected({"--kernel", kernel_, "--cpu-affinity", "io=1000"},
                  {"--cpu-affinity io: CPU 1000 is not one tern may run on (sched_getaffinity: "});
  expect_rejected({"--kernel", kernel_, "--cpu-affinity", "disk=0"},
                  {"--cpu-affinity disk: unknown thread class (vcpu, vcpuN, io)"});
}

TEST_F(RunBadInput, MissingInitrd) {
  expect_rejected({"--kernel", kernel_, "--initrd", (dir_ / "nope").string()},
                  {"--initrd", "No such file"});
}

TEST_F(RunBadInput, CmdlineLongerThanTheKernelAccepts) {
  FakeKernel k;
  k.cmdline_size = 64;
  std::string cmdline(100, 'x');
  expect_rejected({"--kernel", write("k64", make_fake_bzimage(k)), "--cmdline", cmdline},
                  {"--cmdline", "64"});
}

TEST_F(RunBadInput, MemoryTooSmallForKernelAndInitrd) {
  expect_rejected({"--kernel", kernel_, "--initrd", initrd_, "--memory", "16M"}, {"--memory"});
}

TEST_F(RunBadInput, MemoryLargerThanTheHost) {
  expect_rejected({"--kernel", kernel_, "--memory", "64T"}, {"--memory", "more than this host"});
}

TEST_F(RunBadInput, InitrdCannotBePlacedUnderInitrdAddrMax) {
  FakeKernel k;
  k.initrd_addr_max = 0x01FFFFFF;  // 32 MiB: below the kernel's footprint (16 MiB + 8 MiB) + initrd
  auto big_initrd = write("big", std::vector<uint8_t>(16 << 20, 1));
  expect_rejected({"--kernel", write("kmax", make_fake_bzimage(k)), "--initrd", big_initrd},
                  {"--initrd"});
}

TEST_F(RunBadInput, CpusZeroOrAbsurd) {
  expect_rejected({"--kernel", kernel_, "--cpus", "0"}, {"--cpus", "out of range"});
  expect_rejected({"--kernel", kernel_, "--cpus", "100000"}, {"--cpus", "out of range"});
  expect_rejected({"--kernel", kernel_, "--cpus", "two"}, {"--cpus"});
}

TEST_F(RunBadInput, MalformedSizes) {
  expect_rejected({"--kernel", kernel_, "--memory", "12X"}, {"--memory", "12X"});
  expect_rejected({"--kernel", kernel_, "--memory", "0"}, {"--memory"});
  expect_rejected({"--kernel", kernel_, "--memory", "1.5G"}, {"--memory"});
}

TEST_F(RunBadInput, BadConsoleTarget) {
  expect_rejected({"--kernel", kernel_, "--console", "tty"}, {"--console"});
}

TEST_F(RunBadInput, BadDiskInterface) {
  auto img = write("disk.img", std::vector<uint8_t>(1 << 20, 0));
  expect_rejected({"--kernel", kernel_, "--disk", "path=" + img + ",interface=scsi"},
                  {"--disk interface=scsi", "unknown disk interface (virtio, nvme)"});
  expect_rejected({"--kernel", kernel_, "--disk", "path=" + img + ",interface="},
                  {"--disk interface="});
  expect_rejected({"--kernel", kernel_, "--disk", "path=" + img + ",interface=nvme,queues=2"},
                  {"--disk queues", "not with interface=nvme"});
  expect_rejected({"--kernel", kernel_, "--disk", "path=" + img + ",interface=nvme,queue_size=64"},
                  {"--disk queue_size", "not with interface=nvme"});
  expect_rejected({"--kernel", kernel_, "--disk", "vhost-user=/tmp/x.sock,interface=nvme"},
                  {"--disk interface=nvme", "not with vhost-user="});
  expect_rejected(
      {"--kernel", kernel_, "--disk", "path=" + (dir_ / "absent.img").string() + ",interface=nvme"},
      {"--disk path"});
}

TEST_F(RunBadInput, ValidInputReachesTheHostCheck) {
  RunResult r = run_tern({"run", "--kernel", kernel_, "--initrd", initrd_, "--memory", "256M"});
  // 2 on a host without VMX/SVM: validation passed and nothing ran. On a host with hardware
  // virtualization the fake kernel would start, so only assert what validation guarantees.
  EXPECT_NE(r.status, 1) << r.err;
}

TEST_F(RunBadInput, SnapshotPathsThatAreNotUtf8AreRefusedByName) {
  // Before: the client threw while building its request and exited "internal error".
  for (const char* opt : {"--state", "--mem"}) {
    std::vector<std::string> args = {"snapshot",
                                     "--api-sock",
                                     (dir_ / "no.sock").string(),
                                     "--state",
                                     (dir_ / "vm.state").string(),
                                     "--mem",
                                     (dir_ / "vm.mem").string()};
    auto at = std::find(args.begin(), args.end(), std::string(opt));
    *(at + 1) += "\xe9";  // Latin-1 e-acute
    RunResult r = run_tern(args);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find(std::string(opt) + ": the path is not valid UTF-8"), std::string::npos)
        << r.err;
  }
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// --firmware: bad input exits 1 naming the field, before the host check (a valid firmware on a
// host without VMX/SVM exits 2, so validation came first).
TEST(RunBadFirmwareInput, Refused) {
  auto both = run_tern({"run", "--firmware", "/usr/share/seabios/bios-256k.bin", "--kernel", "k"});
  EXPECT_EQ(both.status, 1);
  EXPECT_NE(both.err.find("--firmware and --kernel cannot be combined: "), std::string::npos)
      << both.err;
  auto missing = run_tern({"run", "--firmware", "/nonexistent/bios.bin"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("--firmware: "), std::string::npos) << missing.err;
  // A file that is not firmware: this test binary (no reset-vector jump, odd size).
  auto not_fw = run_tern({"run", "--firmware", "/proc/self/exe"});
  EXPECT_EQ(not_fw.status, 1);
  EXPECT_NE(not_fw.err.find("--firmware: "), std::string::npos) << not_fw.err;
  auto vars = run_tern({"run", "--firmware", "/usr/share/seabios/bios-256k.bin", "--firmware-vars",
                        "/tmp/tern-cli-vars.fd"});
  if (fs::exists("/usr/share/seabios/bios-256k.bin")) {
    EXPECT_EQ(vars.status, 1);
    EXPECT_NE(vars.err.find("--firmware-vars: needs a UEFI --firmware"), std::string::npos)
        << vars.err;
  }
  EXPECT_FALSE(fs::exists("/tmp/tern-cli-vars.fd"));  // nothing created for a refused run
}

// tern restore --on-reboot takes exit or restart, refused naming the option before the snapshot
// is read.
TEST(RestoreBadInput, OnRebootIsCheckedByName) {
  auto bad = run_tern({"restore", "--state", "/nonexistent/vm.state", "--mem",
                       "/nonexistent/vm.mem", "--on-reboot", "reset"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--on-reboot: \"reset\" is not one of exit, restart"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace tern
