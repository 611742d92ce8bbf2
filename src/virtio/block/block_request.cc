#include "virtio/block/block_request.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "base/checked.h"
#include "virtio/block/virtio_blk_spec.h"

namespace tern::virtio {

namespace {

// Collects the host views of the bytes [skip, skip + limit) of the readable or writable
// segments of `chain`, skipping empty pieces.
std::vector<iovec> collect(const DescriptorChain& chain, bool writable, uint64_t skip,
                           uint64_t limit) {
  std::vector<iovec> out;
  for (const auto& s : chain.segments) {
    if (s.writable != writable || limit == 0) continue;
    uint64_t n = s.host.size();
    if (skip >= n) {
      skip -= n;
      continue;
    }
    uint64_t take = std::min(n - skip, limit);
    if (take > 0) out.push_back(iovec{s.host.data() + skip, static_cast<size_t>(take)});
    limit -= take;
    skip = 0;
  }
  return out;
}

// Copies the first out.size() readable bytes after `skip` into `out`.
void gather(const DescriptorChain& chain, uint64_t skip, std::span<uint8_t> out) {
  size_t done = 0;
  for (const auto& v : collect(chain, false, skip, out.size())) {
    std::memcpy(out.data() + done, v.iov_base, v.iov_len);
    done += v.iov_len;
  }
}

BlockRequest refuse(BlockRequest r, uint8_t status, const char* why) {
  r.op = BlockRequest::Op::kNone;
  r.status_value = status;
  r.problem = why;
  r.data.clear();
  r.ranges.clear();
  return r;
}

// [sector, sector + sectors) inside the disk, without overflow.
bool in_range(uint64_t sector, uint64_t sectors, uint64_t capacity) {
  return sector <= capacity && sectors <= capacity - sector;
}

}  // namespace

uint32_t BlockRequest::success_used_len() const {
  switch (op) {
    case Op::kIn: return static_cast<uint32_t>(len) + 1;
    case Op::kGetId: return VIRTIO_BLK_ID_BYTES + 1;
    default: return status != nullptr ? 1 : 0;
  }
}

BlockRequest parse_block_request(const DescriptorChain& chain, const BlockLimits& limits) {
  BlockRequest r;
  r.head = chain.head;

  // Status: the last device-writable byte.
  for (auto it = chain.segments.rbegin(); it != chain.segments.rend(); ++it) {
    if (it->writable && !it->host.empty()) {
      r.status = it->host.data() + it->host.size() - 1;
      break;
    }
  }
  if (r.status == nullptr) return refuse(r, VIRTIO_BLK_S_IOERR, "missing status byte");

  VirtioBlkOuthdr hdr{};
  if (chain.readable_bytes < sizeof hdr) return refuse(r, VIRTIO_BLK_S_IOERR, "short header");
  gather(chain, 0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&hdr), sizeof hdr));
  r.type = hdr.type;

  uint64_t in_data = chain.readable_bytes - sizeof hdr;  // readable bytes after the header
  uint64_t out_data = chain.writable_bytes - 1;          // writable bytes before the status

  switch (hdr.type) {
    case VIRTIO_BLK_T_IN:
    case VIRTIO_BLK_T_OUT: {
      bool in = hdr.type == VIRTIO_BLK_T_IN;
      if (!in && limits.read_only) return refuse(r, VIRTIO_BLK_S_IOERR, "write to read-only disk");
      if (in ? in_data != 0 : out_data != 0)
        return refuse(r, VIRTIO_BLK_S_IOERR, "data buffer in the wrong direction");
      r.len = in ? out_data : in_data;
      if (r.len % kSectorSize != 0)
        return refuse(r, VIRTIO_BLK_S_IOERR, "data length not a multiple of 512");
      if (!in_range(hdr.sector, r.len / kSectorSize, limits.capacity_sectors))
        return refuse(r, VIRTIO_BLK_S_IOERR, "sector out of range");
      if (r.len > UINT32_MAX - 1) return refuse(r, VIRTIO_BLK_S_IOERR, "request too large");
      r.offset = hdr.sector * kSectorSize;  // cannot overflow: sector <= capacity < 2^55
      r.data = in ? collect(chain, true, 0, r.len) : collect(chain, false, sizeof hdr, r.len);
      if (r.data.size() > IOV_MAX) return refuse(r, VIRTIO_BLK_S_IOERR, "too many segments");
      if (limits.seg_max != 0 && r.data.size() > limits.seg_max) {
        r.over_limits = true;
        return refuse(r, VIRTIO_BLK_S_IOERR, "more data segments than seg_max");
      }
      if (limits.size_max != 0 && std::any_of(r.data.begin(), r.data.end(), [&](const iovec& v) {
            return v.iov_len > limits.size_max;
          })) {
        r.over_limits = true;
        return refuse(r, VIRTIO_BLK_S_IOERR, "data segment larger than size_max");
      }
      r.op = in ? BlockRequest::Op::kIn : BlockRequest::Op::kOut;
      return r;
    }
    case VIRTIO_BLK_T_FLUSH:
      r.op = BlockRequest::Op::kFlush;
      return r;
    case VIRTIO_BLK_T_GET_ID:
      if (out_data < VIRTIO_BLK_ID_BYTES)
        return refuse(r, VIRTIO_BLK_S_IOERR, "GET_ID buffer shorter than 20 bytes");
      r.len = VIRTIO_BLK_ID_BYTES;
      r.data = collect(chain, true, 0, VIRTIO_BLK_ID_BYTES);
      r.op = BlockRequest::Op::kGetId;
      return r;
    case VIRTIO_BLK_T_DISCARD:
    case VIRTIO_BLK_T_WRITE_ZEROES: {
      bool discard = hdr.type == VIRTIO_BLK_T_DISCARD;
      // A read-only disk never offers DISCARD/WRITE_ZEROES; answer like any other write (IOERR).
      if (limits.read_only) return refuse(r, VIRTIO_BLK_S_IOERR, "write to read-only disk");
      if (discard ? !limits.discard : !limits.write_zeroes)
        return refuse(r, VIRTIO_BLK_S_UNSUPP, "feature not negotiated");
      uint32_t max_seg = discard ? limits.max_discard_seg : limits.max_write_zeroes_seg;
      uint32_t max_sectors = discard ? limits.max_discard_sectors : limits.max_write_zeroes_sectors;
      constexpr uint64_t kSeg = sizeof(VirtioBlkDiscardWriteZeroes);
      if (in_data == 0 || in_data % kSeg != 0)
        return refuse(r, VIRTIO_BLK_S_IOERR, "bad discard/write-zeroes segment list");
      if (in_data / kSeg > max_seg) return refuse(r, VIRTIO_BLK_S_IOERR, "too many segments");
      for (uint64_t i = 0; i < in_data / kSeg; ++i) {
        VirtioBlkDiscardWriteZeroes seg{};
        gather(chain, sizeof hdr + i * kSeg,
               std::span<uint8_t>(reinterpret_cast<uint8_t*>(&seg), sizeof seg));
        if ((seg.flags & ~VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) != 0)
          return refuse(r, VIRTIO_BLK_S_UNSUPP, "unknown segment flags");
        bool unmap = (seg.flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) != 0;
        if (discard && unmap) return refuse(r, VIRTIO_BLK_S_UNSUPP, "unmap flag on discard");
        if (seg.num_sectors > max_sectors)
          return refuse(r, VIRTIO_BLK_S_IOERR, "segment larger than the maximum");
        if (!in_range(seg.sector, seg.num_sectors, limits.capacity_sectors))
          return refuse(r, VIRTIO_BLK_S_IOERR, "sector out of range");
        if (seg.num_sectors == 0) continue;
        r.ranges.push_back(
            BlockRange{seg.sector * kSectorSize, uint64_t{seg.num_sectors} * kSectorSize, unmap});
      }
      r.op = discard ? BlockRequest::Op::kDiscard : BlockRequest::Op::kWriteZeroes;
      return r;
    }
    default:
      return refuse(r, VIRTIO_BLK_S_UNSUPP, "unsupported request type");
  }
}

}  // namespace tern::virtio
