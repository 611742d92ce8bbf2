// libFuzzer target: the --config-file parser (Firecracker's config-file JSON) on arbitrary text.
// Nothing may crash; an accepted file has a boot source, unique drive ids and at most one root
// device, vhost-user drives without an image that read back from their GET /vm/config form, a
// valid entropy rate limiter, and serialises back (json_text) without throwing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "api/api_parser.h"
#include "base/testing/fuzz_input.h"
#include "virtio/rng/rng_spec.h"
#include "vmm/config_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  auto c = parse_config_file(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!c) {
    FUZZ_CHECK(!c.error().message().empty());
    return 0;
  }
  FUZZ_CHECK(!c->boot.kernel_image_path.empty());
  std::set<std::string> ids;
  int roots = 0;
  for (const auto& d : c->drives) {
    FUZZ_CHECK(ids.insert(d.drive_id).second);
    roots += d.is_root_device;
    (void)json_text(to_json(d));
    // GET /vm/config's form of a vhost-user drive reads back the same (needs no file).
    if (!d.disk.vhost_user_socket.empty()) {
      auto back = parse_drive(to_json(d), "drive");
      FUZZ_CHECK(back && back->disk.vhost_user_socket == d.disk.vhost_user_socket &&
                 back->disk.queues == d.disk.queues && back->disk.queue_size == d.disk.queue_size);
      FUZZ_CHECK(d.disk.path.empty() && !d.disk.read_only);
    }
  }
  FUZZ_CHECK(roots <= 1);
  FUZZ_CHECK(c->machine.vcpu_count >= 1);
  (void)json_text(to_json(c->boot));
  (void)json_text(to_json(c->machine));
  if (auto e = c->device<RngSpec>()) FUZZ_CHECK(check_rng_config(*e, "entropy").has_value());
  (void)json_text(c->resources().vm_config_json());  // what GET /vm/config would answer
  return 0;
}
