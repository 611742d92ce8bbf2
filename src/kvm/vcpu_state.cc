#include "kvm/vcpu_state.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "kvm/kvm_abi.h"

namespace tern {

namespace {

constexpr uint32_t kMsrIa32Tsc = 0x10;
constexpr uint32_t kMsrIa32TscDeadline = 0x6e0;
constexpr uint32_t kMsrKvmSystemTimeNew = 0x4b564d01;
/// KVM refuses KVM_GET_MSRS / KVM_SET_MSRS with nmsrs >= MAX_IO_MSRS (256): split larger sets.
constexpr size_t kMsrsPerIoctl = 255;

/// MSRs KVM emulates and saves/restores but KVM_GET_MSR_INDEX_LIST does not list: the MTRRs
/// (MTRRdefType, the 11 fixed-range MTRRs, KVM's 8 variable-range pairs). QEMU migrates them too.
constexpr uint32_t kExtraMsrs[] = {
    0x2ff,                                                   // IA32_MTRR_DEF_TYPE
    0x250, 0x258, 0x259,                                     // FIX64K_00000, FIX16K_80000/A0000
    0x268, 0x269, 0x26a, 0x26b, 0x26c, 0x26d, 0x26e, 0x26f,  // FIX4K_C0000 .. FIX4K_F8000
    0x200, 0x201, 0x202, 0x203, 0x204, 0x205, 0x206, 0x207,  // PHYSBASE0/PHYSMASK0 ..
    0x208, 0x209, 0x20a, 0x20b, 0x20c, 0x20d, 0x20e, 0x20f,  // .. PHYSBASE7/PHYSMASK7
};

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}

std::string vcpu_ctx(const KvmVcpu& v) {
  return "vCPU " + std::to_string(v.id());
}

/// Reads `indices` in batches; stops at the first MSR KVM does not read (result is shorter).
Result<std::vector<MsrValue>> read_msrs(KvmVcpu& v, std::span<const uint32_t> indices) {
  std::vector<MsrValue> out;
  out.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); i += kMsrsPerIoctl) {
    auto chunk = indices.subspan(i, std::min(kMsrsPerIoctl, indices.size() - i));
    ASSIGN_OR_RETURN(auto got, v.get_msrs(chunk));
    out.insert(out.end(), got.begin(), got.end());
    if (got.size() < chunk.size()) break;
  }
  return out;
}

/// Prefixes a codec error's context with the field being decoded.
template <class T>
Result<T> named(Result<T> r, const char* field) {
  if (!r) {
    Error e = std::move(r).error();
    e.context = std::string(field) + ": " + e.context;
    return tl::unexpected(std::move(e));
  }
  return r;
}

template <class T>
Result<T> read_pod(snap::ByteReader& r, const char* field) {
  return named(r.pod<T>(), field);
}

}  // namespace

std::string vcpu_time_summary(const VcpuState& s) {
  auto msr = [&](uint32_t index) -> std::string {
    for (const MsrValue& m : s.msrs)
      if (m.index == index) return std::to_string(m.data);
    return "-";
  };
  auto reg = [&](size_t offset) {  // a 32-bit LAPIC register of the KVM_GET_LAPIC image
    uint32_t v;
    std::memcpy(&v, &s.lapic.regs[offset], sizeof v);
    return v;
  };
  const uint32_t lvtt = reg(0x320);
  static constexpr const char* kModes[] = {"one-shot", "periodic", "tsc-deadline", "reserved"};
  std::string kvmclock = msr(kMsrKvmSystemTimeNew);
  if (kvmclock != "-") kvmclock = (std::stoull(kvmclock) & 1) ? "on" : "off";
  return "tsc=" + msr(kMsrIa32Tsc) + " khz=" + std::to_string(s.tsc_khz) +
         " deadline=" + msr(kMsrIa32TscDeadline) + " lvtt=" + kModes[(lvtt >> 17) & 3] +
         ((lvtt & (1u << 16)) ? ",masked" : "") + " tmict=" + std::to_string(reg(0x380)) +
         " tmcct=" + std::to_string(reg(0x390)) + " kvmclock=" + kvmclock;
}

Result<std::vector<uint32_t>> snapshot_msr_list(const KvmSystem& sys, KvmVcpu& probe) {
  ASSIGN_OR_RETURN(std::vector<uint32_t> candidates, sys.msr_index_list());
  candidates.insert(candidates.end(), std::begin(kExtraMsrs), std::end(kExtraMsrs));
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  // KVM_GET_MSRS stops at the first MSR it cannot read (not emulated here, or hidden by CPUID):
  // keep what it read, drop that one, go on after it.
  std::vector<uint32_t> readable;
  std::span<const uint32_t> rest(candidates);
  while (!rest.empty()) {
    ASSIGN_OR_RETURN(auto got, read_msrs(probe, rest));
    for (const MsrValue& m : got) readable.push_back(m.index);
    rest = rest.subspan(std::min(rest.size(), got.size() + 1));
  }

  // Ascending index puts MSR_IA32_TSC (0x10) early; MSR_IA32_TSC_DEADLINE goes last (header).
  std::stable_partition(readable.begin(), readable.end(),
                        [](uint32_t i) { return i != kMsrIa32TscDeadline; });
  static_assert(kMsrIa32Tsc < kMsrIa32TscDeadline);
  return readable;
}

Result<VcpuState> save_vcpu_state(KvmVcpu& v, std::span<const uint32_t> msr_indices) {
  VcpuState s;
  // KVM_GET_MP_STATE first: it lets KVM accept a pending INIT/SIPI, which rewrites registers and
  // events; everything read afterwards then describes the same vCPU state.
  ASSIGN_OR_RETURN(s.mp_state, v.get_mp_state());
  ASSIGN_OR_RETURN(s.regs, v.get_regs());
  ASSIGN_OR_RETURN(s.sregs, v.get_sregs());
  ASSIGN_OR_RETURN(s.xsave, v.get_xsave());
  ASSIGN_OR_RETURN(s.xcrs, v.get_xcrs());
  ASSIGN_OR_RETURN(s.debugregs, v.get_debugregs());
  ASSIGN_OR_RETURN(s.lapic, v.get_lapic());
  ASSIGN_OR_RETURN(s.msrs, read_msrs(v, msr_indices));
  if (s.msrs.size() < msr_indices.size())
    return fail("KVM_GET_MSRS", vcpu_ctx(v) + ": MSR " + hex(msr_indices[s.msrs.size()]) +
                                    " not readable (" + std::to_string(s.msrs.size()) + " of " +
                                    std::to_string(msr_indices.size()) + " read)");
  ASSIGN_OR_RETURN(s.events, v.get_vcpu_events());
  ASSIGN_OR_RETURN(s.tsc_khz, v.get_tsc_khz());
  return s;
}

Result<void> restore_vcpu_state(KvmVcpu& v, const VcpuState& s) {
  // The order and its reasons are documented in vcpu_state.h.
  if (s.tsc_khz != 0) {
    ASSIGN_OR_RETURN(uint32_t cur, v.get_tsc_khz());
    if (cur != s.tsc_khz) {
      auto r = v.set_tsc_khz(s.tsc_khz);
      if (!r) {
        Error e = std::move(r).error();
        e.context += " (this vCPU runs at " + std::to_string(cur) +
                     " kHz; the guest's TSC would run at another rate)";
        return tl::unexpected(std::move(e));
      }
    }
  }
  TRY(v.set_mp_state(s.mp_state));
  TRY(v.set_regs(s.regs));
  TRY(v.set_sregs(s.sregs));
  TRY(v.set_xsave(s.xsave));
  TRY(v.set_xcrs(s.xcrs));
  TRY(v.set_debugregs(s.debugregs));
  TRY(v.set_lapic(s.lapic));
  std::span<const MsrValue> msrs(s.msrs);
  for (size_t i = 0; i < msrs.size(); i += kMsrsPerIoctl) {
    auto chunk = msrs.subspan(i, std::min(kMsrsPerIoctl, msrs.size() - i));
    ASSIGN_OR_RETURN(size_t n, v.set_msrs(chunk));
    if (n < chunk.size())
      return fail("KVM_SET_MSRS", vcpu_ctx(v) + ": MSR " + hex(chunk[n].index) + " = " +
                                      hex(chunk[n].data) + " rejected (" + std::to_string(i + n) +
                                      " of " + std::to_string(msrs.size()) + " set)");
  }
  TRY(v.set_vcpu_events(s.events));
  // 11. The host stopped this vCPU from its save until now: flag it in the guest's pvclock page
  //     (a guest without kvmclock has none: false, not an error).
  ASSIGN_OR_RETURN(bool flagged, v.kvmclock_ctrl());
  (void)flagged;
  return {};
}

void encode_vcpu_state(snap::ByteWriter& w, const VcpuState& s) {
  w.pod(s.regs);
  w.pod(s.sregs);
  w.blob(s.xsave);
  w.pod(s.xcrs);
  w.pod(s.debugregs);
  w.u32(static_cast<uint32_t>(s.msrs.size()));
  for (const MsrValue& m : s.msrs) {
    w.u32(m.index);
    w.u64(m.data);
  }
  w.pod(s.lapic);
  w.pod(s.mp_state);
  w.pod(s.events);
  w.u32(s.tsc_khz);
}

Result<VcpuState> decode_vcpu_state(snap::ByteReader& r) {
  VcpuState s;
  ASSIGN_OR_RETURN(s.regs, read_pod<kvm_regs>(r, "regs"));
  ASSIGN_OR_RETURN(s.sregs, read_pod<kvm_sregs>(r, "sregs"));
  ASSIGN_OR_RETURN(s.xsave, named(r.blob(kMaxXsaveBytes), "xsave"));
  if (s.xsave.size() < kvm_abi::kXsaveLegacyBytes)
    return fail(r.what(), "xsave: " + std::to_string(s.xsave.size()) + " bytes, under " +
                              std::to_string(kvm_abi::kXsaveLegacyBytes));
  ASSIGN_OR_RETURN(s.xcrs, read_pod<kvm_xcrs>(r, "xcrs"));
  if (s.xcrs.nr_xcrs > KVM_MAX_XCRS)
    return fail(r.what(), "xcrs: nr_xcrs " + std::to_string(s.xcrs.nr_xcrs) + " exceeds " +
                              std::to_string(KVM_MAX_XCRS));
  ASSIGN_OR_RETURN(s.debugregs, read_pod<kvm_debugregs>(r, "debugregs"));
  ASSIGN_OR_RETURN(uint32_t nmsrs, read_pod<uint32_t>(r, "msr count"));
  if (nmsrs > kMaxSnapshotMsrs)
    return fail(r.what(), "msr count " + std::to_string(nmsrs) + " exceeds " +
                              std::to_string(kMaxSnapshotMsrs));
  if (size_t{nmsrs} * 12 > r.remaining())
    return fail(r.what(), "msrs: " + std::to_string(nmsrs) + " entries need " +
                              std::to_string(size_t{nmsrs} * 12) + " bytes, " +
                              std::to_string(r.remaining()) + " left");
  s.msrs.reserve(nmsrs);
  for (uint32_t i = 0; i < nmsrs; ++i) {
    ASSIGN_OR_RETURN(uint32_t index, read_pod<uint32_t>(r, "msr index"));
    ASSIGN_OR_RETURN(uint64_t data, read_pod<uint64_t>(r, "msr value"));
    s.msrs.push_back(MsrValue{index, data});
  }
  ASSIGN_OR_RETURN(s.lapic, read_pod<kvm_lapic_state>(r, "lapic"));
  ASSIGN_OR_RETURN(s.mp_state, read_pod<kvm_mp_state>(r, "mp_state"));
  ASSIGN_OR_RETURN(s.events, read_pod<kvm_vcpu_events>(r, "vcpu_events"));
  ASSIGN_OR_RETURN(s.tsc_khz, read_pod<uint32_t>(r, "tsc_khz"));
  return s;
}

}  // namespace tern
