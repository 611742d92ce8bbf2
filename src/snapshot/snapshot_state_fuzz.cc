// libFuzzer target: everything tern reads from a snapshot state file before building a VM — the
// container (parse_state_file: magic, version, section table, checksum) and the decoders of the
// machine, KVM VM and vCPU sections. The first input byte picks the target; the rest is its input.
// The checksum would keep the fuzzer out of the section decoders, so they get raw bytes directly.
// Nothing may crash or hang; a successful decode must re-encode to the bytes it consumed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "base/testing/fuzz_input.h"
#include "kvm/vcpu_state.h"
#include "kvm/vm_kvm_state.h"
#include "vmm/machine_state.h"
#include "snapshot/snapshot_pair.h"
#include "snapshot/state_file.h"

namespace {

// decode -> encode gives back exactly the consumed prefix of the input.
template <class Decode, class Encode>
void round_trip(std::span<const uint8_t> in, Decode decode, Encode encode) {
  tern::snap::ByteReader r(in, "fuzz");
  auto v = decode(r);
  if (!v) return;
  tern::snap::ByteWriter w;
  encode(w, *v);
  size_t used = in.size() - r.remaining();
  FUZZ_CHECK(w.data().size() == used);
  FUZZ_CHECK(std::equal(w.data().begin(), w.data().end(), in.begin()));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  if (size < 1) return 0;
  std::span<const uint8_t> in(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto f = snap::parse_state_file(in, "fuzz");
      if (f) FUZZ_CHECK(snap::serialize_state_file(*f).size() == in.size());
      if (f) (void)snap::state_pairing_token(*f, "fuzz");  // restore's first look at the file
      break;
    }
    case 1:
      round_trip(in, snap::decode_machine_state, snap::encode_machine_state);
      break;
    case 2:
      round_trip(in, decode_vm_kvm_state, encode_vm_kvm_state);
      break;
    case 3:
      round_trip(in, decode_vcpu_state, encode_vcpu_state);
      break;
  }
  return 0;
}
