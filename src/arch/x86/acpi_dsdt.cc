#include "arch/x86/acpi_dsdt.h"

#include "base/result.h"

namespace tern::x86::acpi {

namespace {

// AML opcodes (ACPI 6.0 section 20.2).
constexpr uint8_t kZeroOp = 0x00;
constexpr uint8_t kOneOp = 0x01;
constexpr uint8_t kNameOp = 0x08;
constexpr uint8_t kBytePrefix = 0x0A;
constexpr uint8_t kPackageOp = 0x12;

/// ComputationalData for a small integer: ZeroOp, OneOp or BytePrefix ByteData.
void append_integer(std::vector<uint8_t>& out, uint8_t v) {
  if (v == 0) {
    out.push_back(kZeroOp);
  } else if (v == 1) {
    out.push_back(kOneOp);
  } else {
    out.push_back(kBytePrefix);
    out.push_back(v);
  }
}

constexpr uint8_t kDWordPrefix = 0x0C;
constexpr uint8_t kBufferOp = 0x11;
constexpr uint8_t kExtOpPrefix = 0x5B;
constexpr uint8_t kDeviceOp = 0x82;  // after ExtOpPrefix
constexpr uint8_t kRootChar = 0x5C;
constexpr uint8_t kDualNamePrefix = 0x2E;

void put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(std::vector<uint8_t>& out, uint32_t v) {
  put16(out, static_cast<uint16_t>(v));
  put16(out, static_cast<uint16_t>(v >> 16));
}

/// PkgLength (§20.2.4) for `body` followed by the body: one byte up to 63, two up to 4095.
std::vector<uint8_t> with_pkg_length(const std::vector<uint8_t>& body) {
  std::vector<uint8_t> out;
  size_t len = body.size() + 1;
  if (len <= 0x3F) {
    out.push_back(static_cast<uint8_t>(len));
  } else {
    len = body.size() + 2;
    TERN_CHECK(len < 0x1000);
    out.push_back(static_cast<uint8_t>(0x40 | (len & 0xF)));
    out.push_back(static_cast<uint8_t>(len >> 4));
  }
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

void append_name(std::vector<uint8_t>& out, const char (&seg)[5]) {
  out.push_back(kNameOp);
  out.insert(out.end(), seg, seg + 4);
}

/// Word Address Space Descriptor (ACPI 6.0 §6.4.3.5.3): producer, MinFixed, MaxFixed.
void word_address(std::vector<uint8_t>& out, uint8_t type, uint8_t type_flags, uint16_t min,
                  uint16_t max) {
  out.insert(out.end(), {0x88, 0x0D, 0x00, type, 0x0C, type_flags});
  put16(out, 0);  // granularity
  put16(out, min);
  put16(out, max);
  put16(out, 0);  // translation offset
  put16(out, static_cast<uint16_t>(max - min + 1));
}

}  // namespace

std::vector<uint8_t> aml_pci_root(uint32_t mmio_start, uint32_t mmio_end) {
  // ResourceTemplate: WordBusNumber 0-255, IO 0xCF8 len 8, WordIO 0-0xCF7 and 0xD00-0xFFFF,
  // DWordMemory [mmio_start, mmio_end), EndTag.
  std::vector<uint8_t> res;
  word_address(res, 0x02, 0x00, 0x0000, 0x00FF);
  res.insert(res.end(), {0x47, 0x01, 0xF8, 0x0C, 0xF8, 0x0C, 0x01, 0x08});
  word_address(res, 0x01, 0x03, 0x0000, 0x0CF7);
  word_address(res, 0x01, 0x03, 0x0D00, 0xFFFF);
  // DWord Address Space Descriptor (§6.4.3.5.2): memory, producer, MinFixed/MaxFixed, read-write
  // non-cacheable.
  res.insert(res.end(), {0x87, 0x17, 0x00, 0x00, 0x0C, 0x01});
  put32(res, 0);
  put32(res, mmio_start);
  put32(res, mmio_end - 1);
  put32(res, 0);
  put32(res, mmio_end - mmio_start);
  res.insert(res.end(), {0x79, 0x00});  // End Tag, checksum 0 ("treated as correct")

  std::vector<uint8_t> buf_body = {kBytePrefix, static_cast<uint8_t>(res.size())};
  TERN_CHECK(res.size() < 256);
  buf_body.insert(buf_body.end(), res.begin(), res.end());

  std::vector<uint8_t> dev;  // NameString then the device's objects
  dev.insert(dev.end(), {kRootChar, kDualNamePrefix, '_', 'S', 'B', '_', 'P', 'C', 'I', '0'});
  append_name(dev, "_HID");
  dev.push_back(kDWordPrefix);
  dev.insert(dev.end(), {0x41, 0xD0, 0x0A, 0x03});  // EisaId("PNP0A03")
  append_name(dev, "_UID");
  dev.push_back(kZeroOp);
  append_name(dev, "_BBN");
  dev.push_back(kZeroOp);
  append_name(dev, "_CRS");
  dev.push_back(kBufferOp);
  auto buf = with_pkg_length(buf_body);
  dev.insert(dev.end(), buf.begin(), buf.end());

  std::vector<uint8_t> aml = {kExtOpPrefix, kDeviceOp};
  auto pkg = with_pkg_length(dev);
  aml.insert(aml.end(), pkg.begin(), pkg.end());
  return aml;
}

std::vector<uint8_t> aml_s5_package(uint8_t slp_typ) {
  // DefName := NameOp NameString DataRefObject; "_S5_" is a NameSeg (4 chars, '_' padded).
  // DefPackage := PackageOp PkgLength NumElements PackageElementList
  constexpr uint8_t kNumElements = 4;
  std::vector<uint8_t> aml = {kNameOp,           '_',         'S', '5', '_', kPackageOp,
                              0 /* PkgLength */, kNumElements};
  constexpr size_t kPkgLengthAt = 6;
  append_integer(aml, slp_typ);  // SLP_TYPa
  append_integer(aml, 0);        // SLP_TYPb
  append_integer(aml, 0);        // reserved
  append_integer(aml, 0);        // reserved
  // PkgLength counts itself, NumElements and the elements. The one-byte encoding (bits 7-6 = 0,
  // length in bits 5-0) holds up to 63.
  const size_t pkg_length = aml.size() - kPkgLengthAt;
  TERN_CHECK(pkg_length <= 0x3F);
  aml[kPkgLengthAt] = static_cast<uint8_t>(pkg_length);
  return aml;
}

}  // namespace tern::x86::acpi
