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

}  // namespace

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
