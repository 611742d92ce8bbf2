// libFuzzer target: everything tern reads from a snapshot state file before building a VM — the
// container (parse_state_file: magic, version, section table, checksum) and the decoders of the
// machine, KVM VM and vCPU sections. The first input byte picks the target; the rest is its input.
// The checksum would keep the fuzzer out of the section decoders, so they get raw bytes directly.
// Nothing may crash or hang; a successful parse or decode must re-encode to the very bytes it
// consumed (compared byte for byte).
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <span>
#include <vector>

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
      if (f) {
        const std::vector<uint8_t> again = snap::serialize_state_file(*f);
        if (f->format_minor == snap::kStateFormatMinor) {
          // What parses re-serialises to the very same bytes (same sections, order, versions,
          // payloads and checksum), not only to as many.
          FUZZ_CHECK(again.size() == in.size());
          FUZZ_CHECK(std::equal(again.begin(), again.end(), in.begin()));
        } else {
          // Another minor version is written as this tern's: the same content, parsed back.
          auto back = snap::parse_state_file(again, "fuzz");
          FUZZ_CHECK(back.has_value());
          FUZZ_CHECK(back->tern_version == f->tern_version);
          FUZZ_CHECK(back->sections.size() == f->sections.size());
          for (size_t i = 0; i < f->sections.size(); ++i)
            FUZZ_CHECK(back->sections[i].id == f->sections[i].id &&
                       back->sections[i].version == f->sections[i].version &&
                       back->sections[i].data == f->sections[i].data);
        }
      }
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
