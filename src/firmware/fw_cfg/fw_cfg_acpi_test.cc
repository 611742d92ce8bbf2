#include "firmware/fw_cfg/fw_cfg_acpi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "arch/x86/acpi.h"
#include "arch/x86/acpi_tables.h"
#include "arch/x86/checksum.h"

namespace tern::fw_cfg {
namespace {

using x86::byte_sum;
namespace acpi = x86::acpi;

/// A firmware's table loader in miniature (SeaBIOS src/fw/romfile_loader.c semantics): allocates
/// each file at an address in its zone, adds the pointee's address to pointer fields, adjusts
/// checksum bytes so their range sums to 0. Fails the test on a malformed command.
class Loader {
 public:
  explicit Loader(const AcpiFwCfgFiles& f) {
    files_[std::string(kAcpiTablesFile)] = {0, f.tables};
    files_[std::string(kAcpiRsdpFile)] = {0, f.rsdp};
  }

  void run(const std::vector<uint8_t>& loader) {
    ASSERT_EQ(loader.size() % kLoaderEntrySize, 0u);
    for (size_t at = 0; at < loader.size(); at += kLoaderEntrySize) {
      const uint8_t* e = loader.data() + at;
      const uint32_t cmd = u32(e);
      const std::string f1 = name(e + 4);
      ASSERT_TRUE(files_.count(f1)) << f1;
      File& file = files_[f1];
      if (cmd == kLoaderAllocate) {
        const uint32_t align = u32(e + 4 + 56);
        const uint8_t zone = e[4 + 56 + 4];
        ASSERT_TRUE(align && (align & (align - 1)) == 0);
        ASSERT_EQ(file.addr, 0u) << "allocated twice";
        uint64_t& next = zone == kLoaderZoneFseg ? next_fseg_ : next_high_;
        ASSERT_TRUE(zone == kLoaderZoneFseg || zone == kLoaderZoneHigh);
        next = (next + align - 1) & ~uint64_t{align - 1};
        file.addr = next;
        next += file.bytes.size();
        allocated_.push_back(f1);
      } else if (cmd == kLoaderAddPointer) {
        const std::string src = name(e + 4 + 56);
        const uint32_t off = u32(e + 4 + 112);
        const uint8_t size = e[4 + 112 + 4];
        ASSERT_TRUE(files_.count(src) && files_[src].addr != 0) << "pointee not allocated";
        ASSERT_NE(file.addr, 0u);
        ASSERT_TRUE(size == 1 || size == 2 || size == 4 || size == 8);
        ASSERT_LE(off + size, file.bytes.size());
        uint64_t v = 0;
        std::memcpy(&v, file.bytes.data() + off, size);
        ASSERT_LT(v, files_[src].bytes.size()) << "pointer field holds an offset in the pointee";
        v += files_[src].addr;
        std::memcpy(file.bytes.data() + off, &v, size);
        ++pointers_;
      } else if (cmd == kLoaderAddChecksum) {
        const uint32_t off = u32(e + 4 + 56), start = u32(e + 60 + 4), len = u32(e + 60 + 8);
        ASSERT_LT(off, file.bytes.size());
        ASSERT_LE(uint64_t{start} + len, file.bytes.size());
        EXPECT_EQ(file.bytes[off], 0)
            << "OVMF computes the checksum without subtracting the old one";
        file.bytes[off] -= byte_sum(std::span(file.bytes).subspan(start, len));
        ++checksums_;
      } else {
        FAIL() << "command " << cmd;
      }
    }
  }

  /// `n` bytes at guest address `addr` (inside one allocated file).
  std::span<const uint8_t> at(uint64_t addr, size_t n) const {
    for (const auto& [_, f] : files_)
      if (f.addr && addr >= f.addr && addr + n <= f.addr + f.bytes.size())
        return std::span(f.bytes).subspan(addr - f.addr, n);
    ADD_FAILURE() << "address " << std::hex << addr << " is not in a loaded file";
    static const std::vector<uint8_t> zeros(4096);
    return std::span(zeros).first(n);
  }
  template <class T>
  T get(uint64_t addr) const {
    T v;
    std::memcpy(&v, at(addr, sizeof v).data(), sizeof v);
    return v;
  }
  uint64_t addr(std::string_view file) const { return files_.at(std::string(file)).addr; }
  int pointers_ = 0, checksums_ = 0;
  std::vector<std::string> allocated_;

 private:
  struct File {
    uint64_t addr = 0;
    std::vector<uint8_t> bytes;
  };
  static uint32_t u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  static std::string name(const uint8_t* p) {
    return std::string(reinterpret_cast<const char*>(p),
                       strnlen(reinterpret_cast<const char*>(p), 56));
  }
  std::map<std::string, File> files_;
  uint64_t next_fseg_ = 0xF0000, next_high_ = 0x7FFE0010;
};

/// Checks a table header at `addr` and returns its length.
uint32_t check_table(const Loader& l, uint64_t addr, std::string_view sig) {
  auto h = l.get<acpi::TableHeader>(addr);
  EXPECT_EQ(std::string_view(h.signature, 4), sig);
  EXPECT_EQ(byte_sum(l.at(addr, h.length)), 0) << sig << " checksum";
  return h.length;
}

TEST(FwCfgAcpi, LoaderCommandsBuildTheRsdpXsdtFadtDsdtChain) {
  x86::AcpiConfig config;
  config.num_vcpus = 3;
  config.pm_base = 0xB000;
  config.reset_port = 0xCF9;
  config.reset_value = 0x06;
  auto files = build_acpi_fw_cfg_files(config);
  ASSERT_TRUE(files.has_value());
  Loader l(*files);
  l.run(files->loader);
  EXPECT_THAT(l.allocated_, ::testing::ElementsAre("etc/acpi/tables", "etc/acpi/rsdp"));
  EXPECT_EQ(l.pointers_, 6);   // XSDT x2, FADT x3, RSDP
  EXPECT_EQ(l.checksums_, 6);  // XSDT, FADT, DSDT, MADT, RSDP x2

  const uint64_t rsdp = l.addr(kAcpiRsdpFile);
  EXPECT_GE(rsdp, 0xF0000u);
  EXPECT_EQ(rsdp % 16, 0u);
  EXPECT_EQ(l.addr(kAcpiTablesFile) % 64, 0u);
  auto r = l.get<acpi::Rsdp>(rsdp);
  EXPECT_EQ(std::string_view(r.signature, 8), "RSD PTR ");
  EXPECT_EQ(byte_sum(l.at(rsdp, acpi::kRsdpV1Length)), 0);
  EXPECT_EQ(byte_sum(l.at(rsdp, sizeof(acpi::Rsdp))), 0);
  EXPECT_EQ(r.revision, 2);

  const uint32_t xsdt_len = check_table(l, r.xsdt_address, "XSDT");
  ASSERT_EQ(xsdt_len, sizeof(acpi::TableHeader) + 16);
  const auto fadt_addr = l.get<uint64_t>(r.xsdt_address + sizeof(acpi::TableHeader));
  const auto madt_addr = l.get<uint64_t>(r.xsdt_address + sizeof(acpi::TableHeader) + 8);
  check_table(l, fadt_addr, "FACP");
  const uint32_t madt_len = check_table(l, madt_addr, "APIC");
  EXPECT_EQ(madt_len,
            sizeof(acpi::Madt) + 3 * sizeof(acpi::MadtLocalApic) + sizeof(acpi::MadtIoApic));

  auto fadt = l.get<acpi::Fadt>(fadt_addr);
  EXPECT_EQ(fadt.dsdt, fadt.x_dsdt);
  check_table(l, fadt.x_dsdt, "DSDT");
  EXPECT_EQ(
      std::string_view(reinterpret_cast<const char*>(l.at(fadt.x_firmware_ctrl, 4).data()), 4),
      "FACS");
  EXPECT_EQ(fadt.x_firmware_ctrl % 64, 0u);
  // The PM block where the firmware put it.
  EXPECT_EQ(fadt.pm1a_evt_blk, 0xB000u);
  EXPECT_EQ(fadt.pm1a_cnt_blk, 0xB004u);
  EXPECT_EQ(fadt.x_pm1a_cnt_blk.address, 0xB004u);
  EXPECT_EQ(fadt.reset_reg.address, 0xCF9u);  // not tied to the PM block
  EXPECT_EQ(fadt.reset_value, 0x06);
  EXPECT_EQ(fadt.pm_tmr_blk, 0u);
}

TEST(FwCfgAcpi, SameTablesAsADirectBootApartFromAddresses) {
  // Placing the relocatable image at an address by hand gives what the loader gives there.
  x86::AcpiConfig config;
  config.num_vcpus = 2;
  auto files = build_acpi_fw_cfg_files(config);
  ASSERT_TRUE(files.has_value());
  Loader l(*files);
  l.run(files->loader);
  auto img = x86::build_acpi_image(config, x86::AcpiRsdpPlacement::kSeparate);
  ASSERT_TRUE(img.has_value());
  x86::place_acpi_image(*img, l.addr(kAcpiTablesFile));
  auto loaded = l.at(l.addr(kAcpiTablesFile), img->tables.size());
  EXPECT_TRUE(std::equal(loaded.begin(), loaded.end(), img->tables.begin()));
  auto rsdp = l.at(l.addr(kAcpiRsdpFile), img->rsdp.size());
  EXPECT_TRUE(std::equal(rsdp.begin(), rsdp.end(), img->rsdp.begin()));
}

TEST(FwCfgAcpi, PmTimerWhenAsked) {
  x86::AcpiConfig config;
  config.pm_base = 0x600;
  config.pm_timer = true;
  auto img = x86::build_acpi_image(config, x86::AcpiRsdpPlacement::kSeparate);
  ASSERT_TRUE(img.has_value());
  acpi::Fadt f;
  std::memcpy(&f, img->tables.data() + img->fadt, sizeof f);
  EXPECT_EQ(f.pm_tmr_blk, 0x608u);
  EXPECT_EQ(f.pm_tmr_len, 4);
  EXPECT_EQ(f.x_pm_tmr_blk.address, 0x608u);
}

TEST(FwCfgAcpi, AddsTheThreeFiles) {
  FwCfgItems items;
  ASSERT_TRUE(add_acpi_files(items, x86::AcpiConfig{}));
  EXPECT_THAT(items.file_names(),
              ::testing::ElementsAre("etc/acpi/rsdp", "etc/acpi/tables", "etc/table-loader"));
  EXPECT_FALSE(add_acpi_files(items, x86::AcpiConfig{.num_vcpus = 0}));
}

}  // namespace
}  // namespace tern::fw_cfg
