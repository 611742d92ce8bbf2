#include "vhost_user/frontend/frontend_setup.h"

#include <fmt/format.h>

#include "virtio/virtio_spec.h"

namespace tern::vhost_user {

Result<Negotiated> negotiate(FrontendClient& client, uint16_t queues) {
  Negotiated n;
  ASSIGN_OR_RETURN(n.features, client.get_features());
  if (n.features & (uint64_t{1} << VHOST_USER_F_PROTOCOL_FEATURES)) {
    ASSIGN_OR_RETURN(uint64_t offered, client.get_protocol_features());
    n.protocol_features = offered & kTernProtocolFeatures;
    TRY(client.set_protocol_features(n.protocol_features));
  }
  if (n.protocol_features & protocol_feature(VHOST_USER_PROTOCOL_F_MQ)) {
    ASSIGN_OR_RETURN(n.max_queues, client.get_queue_num());
  }
  if (queues > n.max_queues)
    return fail(fmt::format("vhost-user {}", client.socket_path()),
                fmt::format("queues={}: the back-end serves at most {} (GET_QUEUE_NUM{})", queues,
                            n.max_queues,
                            (n.protocol_features & protocol_feature(VHOST_USER_PROTOCOL_F_MQ))
                                ? ""
                                : "; no VHOST_USER_PROTOCOL_F_MQ"));
  TRY(client.set_owner());
  return n;
}

uint64_t features_to_set(uint64_t acked, const Negotiated& n) {
  constexpr uint64_t pf = uint64_t{1} << VHOST_USER_F_PROTOCOL_FEATURES;
  return acked | (n.features & pf);
}

Result<MemTableMsg> memory_table(const GuestMemory& mem) {
  MemTableMsg t;
  for (const MemoryRegion& r : mem.regions()) {
    if (r.fd < 0)
      return fail("vhost-user memory table",
                  fmt::format("guest RAM at {:#x} is not shareable (use --memory-backend memfd or "
                              "hugetlbfs)",
                              r.gpa));
    t.regions.push_back(
        VhostUserMemoryRegion{r.gpa, r.size, reinterpret_cast<uint64_t>(r.host), 0});
    t.fds.push_back(r.fd);
  }
  if (t.regions.empty()) return fail("vhost-user memory table", "no guest RAM");
  return t;
}

Result<void> send_memory_table(FrontendClient& client, const MemTableMsg& table) {
  if (client.has_protocol_feature(VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS)) {
    ASSIGN_OR_RETURN(uint64_t slots, client.get_max_mem_slots());
    if (table.regions.size() > slots)
      return fail(fmt::format("vhost-user {}", client.socket_path()),
                  fmt::format("{} RAM regions but the back-end has {} memory slots "
                              "(GET_MAX_MEM_SLOTS)",
                              table.regions.size(), slots));
    for (size_t i = 0; i < table.regions.size(); ++i)
      TRY(client.add_mem_reg(table.regions[i], table.fds[i]));
    return {};
  }
  if (table.regions.size() > VHOST_MEMORY_BASELINE_NREGIONS)
    return fail(fmt::format("vhost-user {}", client.socket_path()),
                fmt::format("{} RAM regions: SET_MEM_TABLE carries at most {} (the back-end lacks "
                            "CONFIGURE_MEM_SLOTS)",
                            table.regions.size(), VHOST_MEMORY_BASELINE_NREGIONS));
  return client.set_mem_table(table.regions, table.fds);
}

Result<VhostVringAddr> vring_user_addresses(const GuestMemory& mem, uint16_t index,
                                            const VirtqueueConfig& q) {
  const std::string what = fmt::format("queue {}", index);
  if (q.size == 0 || (q.size & (q.size - 1)) != 0)
    return fail(what, fmt::format("size {} is not a power of two", q.size));
  struct Ring {
    const char* name;
    uint64_t gpa, len, align;
  };
  const Ring rings[] = {{"descriptor table", q.desc_gpa, 16ull * q.size, 16},
                        {"available ring", q.avail_gpa, virtio::avail_ring_bytes(q.size), 2},
                        {"used ring", q.used_gpa, virtio::used_ring_bytes(q.size), 4}};
  uint64_t host[3] = {};
  for (int i = 0; i < 3; ++i) {
    if (rings[i].gpa % rings[i].align != 0)
      return fail(what, fmt::format("{} at {:#x} is not {}-byte aligned", rings[i].name,
                                    rings[i].gpa, rings[i].align));
    auto s = mem.slice(rings[i].gpa, rings[i].len);
    if (!s)
      return fail(what, fmt::format("{} at {:#x} ({} bytes) is not in guest RAM", rings[i].name,
                                    rings[i].gpa, rings[i].len));
    host[i] = reinterpret_cast<uint64_t>(s->data());
  }
  VhostVringAddr a;
  a.index = index;
  a.desc_user_addr = host[0];
  a.avail_user_addr = host[1];
  a.used_user_addr = host[2];
  return a;
}

Result<uint16_t> read_used_idx(const GuestMemory& mem, const VirtqueueConfig& q) {
  return mem.read_obj<uint16_t>(q.used_gpa + virtio::used_idx_offset());
}

Result<uint16_t> read_avail_idx(const GuestMemory& mem, const VirtqueueConfig& q) {
  return mem.read_obj<uint16_t>(q.avail_gpa + virtio::avail_idx_offset());
}

Result<uint16_t> check_vring_base(uint32_t num, uint32_t index, uint16_t size, uint16_t used_idx,
                                  uint16_t avail_idx) {
  const std::string what = fmt::format("GET_VRING_BASE of vring {} answered {}", index, num);
  if (num > 0xffff)
    return fail("vhost-user", what + ": outside the split ring's 16-bit index space");
  const auto taken = static_cast<uint16_t>(num - used_idx);  // taken, not yet completed
  const auto made = static_cast<uint16_t>(avail_idx - used_idx);
  if (taken > made || taken > size)
    return fail("vhost-user",
                fmt::format("{}: not between the used ring's idx {} and the available ring's idx "
                            "{} (at most {} ahead of used)",
                            what, used_idx, avail_idx, size));
  return static_cast<uint16_t>(num);
}

Result<void> start_vring(FrontendClient& client, const VringStart& v, bool enable) {
  TRY(client.set_vring_num(v.index, v.size));
  TRY(client.set_vring_base(v.index, v.base));
  TRY(client.set_vring_addr(v.addr));
  TRY(client.set_vring_call(v.index, v.call));
  TRY(client.set_vring_kick(v.index, v.kick));
  if (enable) TRY(client.set_vring_enable(v.index, true));
  return {};
}

}  // namespace tern::vhost_user
