// libFuzzer target: the MSI-X table and PBA (MsixTable) against a model of PCI 3.0 §6.8.2. The
// first byte sizes the table (1..70 vectors: one or two PBA qwords); then each byte picks an
// operation — table read/write at any offset and width, PBA read, Message Control (enable,
// function mask), the device firing a vector, function reset, or a snapshot round trip into a
// fresh table — and the following bytes are its operands.
//
// The model knows each vector's message, mask bit and pending bit and how many interrupts it
// must have delivered. Checked after every operation: table and PBA reads give the model's
// bytes (reserved vector-control bits read 0, bytes past the table read 0), each irqfd was
// signalled exactly when the model delivered, every unmasked vector is routed to its current
// message, and save -> restore -> save gives the same bytes.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "devices/pci/msix_table.h"
#include "devices/pci/pci_registers.h"
#include "devices/testing/fake_pci_platform.h"

namespace {

using namespace tern;
using tern::testing::FuzzInput;
using tern::testing::load_le;

struct Vector {
  uint32_t words[4] = {0, 0, 0, pci::kMsixVectorMasked};  // addr lo, addr hi, data, control
  bool pending = false;
  bool masked() const { return words[3] & pci::kMsixVectorMasked; }
};

struct Model {
  std::vector<Vector> v;
  bool enabled = false;
  bool function_mask = false;
  uint64_t delivered = 0;  // interrupts the table must have signalled since the last drain

  bool deliverable(const Vector& e) const { return enabled && !function_mask && !e.masked(); }
  uint8_t table_byte(uint64_t o) const {
    if (o / 16 >= v.size()) return 0;
    return static_cast<uint8_t>(v[o / 16].words[(o % 16) / 4] >> (8 * (o % 4)));
  }
  uint8_t pba_byte(uint64_t o) const {
    uint8_t b = 0;
    for (unsigned bit = 0; bit < 8; ++bit)
      if (o * 8 + bit < v.size() && v[o * 8 + bit].pending) b |= static_cast<uint8_t>(1u << bit);
    return b;
  }
  void flush() {
    for (auto& e : v) {
      if (e.pending && deliverable(e)) {
        e.pending = false;
        ++delivered;
      }
    }
  }
};

std::vector<uint8_t> save(const MsixTable& t) {
  snap::ByteWriter w;
  t.save_state(w);
  return w.take();
}

struct Fuzz {
  FakePciPlatform platform;
  std::unique_ptr<MsixTable> table;
  Model m;

  explicit Fuzz(uint16_t n) : table(MsixTable::create(n, platform).value()) { m.v.resize(n); }

  void table_write(uint64_t off, std::span<const uint8_t> d) {
    std::vector<bool> touched(m.v.size());
    std::vector<bool> was_masked(m.v.size());
    for (size_t i = 0; i < m.v.size(); ++i) was_masked[i] = m.v[i].masked();
    for (size_t i = 0; i < d.size(); ++i) {
      uint64_t o = off + i;
      if (o / 16 >= m.v.size()) continue;
      uint32_t& w = m.v[o / 16].words[(o % 16) / 4];
      unsigned shift = 8 * (o % 4);
      w = (w & ~(0xFFu << shift)) | (uint32_t{d[i]} << shift);
      touched[o / 16] = true;
    }
    for (size_t i = 0; i < m.v.size(); ++i) {
      if (!touched[i]) continue;
      Vector& e = m.v[i];
      e.words[3] &= pci::kMsixVectorMasked;  // reserved bits
      if (was_masked[i] && !e.masked() && e.pending && m.deliverable(e)) {
        e.pending = false;
        ++m.delivered;
      }
    }
    table->table_write(off, d);
  }

  void fire(uint16_t v) {
    bool ok = table->fire(v);
    FUZZ_CHECK(ok == (v < m.v.size()));
    if (!ok) return;
    if (m.deliverable(m.v[v]))
      ++m.delivered;
    else
      m.v[v].pending = true;
  }

  void reset() {
    table->reset();
    m.enabled = m.function_mask = false;
    for (auto& e : m.v) e = Vector{};
  }

  // Snapshot round trip: a fresh table (new irqfds, new GSIs) restored from this one's bytes
  // saves the same bytes and takes over.
  void round_trip() {
    auto bytes = save(*table);
    auto fresh = MsixTable::create(table->size(), platform).value();
    snap::ByteReader r(bytes, "fuzz msix");
    auto ok = fresh->restore_state(r, "fuzz");
    FUZZ_CHECK(ok.has_value() && r.remaining() == 0);
    FUZZ_CHECK(save(*fresh) == bytes);
    drain_and_check();  // the old irqfds' counts, before they go away
    fresh->set_control(m.enabled, m.function_mask);
    m.flush();
    table = std::move(fresh);
  }

  void drain_and_check() {
    uint64_t signalled = 0;
    for (uint16_t v = 0; v < table->size(); ++v) {
      uint64_t n = 0;
      if (::read(table->irqfd(v).get(), &n, sizeof n) == sizeof n) signalled += n;
    }
    FUZZ_CHECK(signalled == m.delivered);
    m.delivered = 0;
  }

  /// `drain`: also read every irqfd (n syscalls, so not after every operation).
  void check(bool drain) {
    FUZZ_CHECK(table->enabled() == m.enabled);
    for (uint16_t v = 0; v < m.v.size(); ++v) {
      const Vector& e = m.v[v];
      FUZZ_CHECK(table->pending(v) == e.pending);
      if (e.pending) FUZZ_CHECK(!m.deliverable(e));
      if (e.masked()) continue;
      auto r = platform.routes.find(table->gsi(v));
      FUZZ_CHECK(r != platform.routes.end());
      FUZZ_CHECK(r->second.address == (uint64_t{e.words[1]} << 32 | e.words[0]));
      FUZZ_CHECK(r->second.data == e.words[2]);
    }
    if (drain) drain_and_check();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  FuzzInput in(data, size);
  const auto n = static_cast<uint16_t>(1 + in.u8() % 70);
  Fuzz f(n);
  const uint64_t table_bytes = f.table->table_bytes();
  FUZZ_CHECK(table_bytes == n * 16u && f.table->pba_bytes() == (n + 63u) / 64u * 8u);
  for (int ops = 0; ops < 512 && !in.empty(); ++ops) {
    const uint8_t op = in.u8();
    switch (op % 8) {
      case 0: {  // table read
        size_t w = in.width();
        uint64_t off = in.u16() % (table_bytes + 32);
        uint8_t b[8];
        f.table->table_read(off, std::span<uint8_t>(b, w));
        for (size_t i = 0; i < w; ++i) FUZZ_CHECK(b[i] == f.m.table_byte(off + i));
        break;
      }
      case 1:
      case 2: {  // table write: usually a vector-control or message dword of one entry
        size_t w = in.width();
        uint64_t off =
            op % 8 == 1 ? (in.u8() % n) * 16u + 4u * (in.u8() % 4) : in.u16() % (table_bytes + 32);
        uint64_t v = in.u8() % 2 ? in.u8() % 2 : in.u64();  // mask / unmask, or anything
        f.table_write(off, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), w));
        break;
      }
      case 3: {  // PBA read
        size_t w = in.width();
        uint64_t off = in.u8() % (f.table->pba_bytes() + 8);
        uint8_t b[8];
        f.table->pba_read(off, std::span<uint8_t>(b, w));
        for (size_t i = 0; i < w; ++i) FUZZ_CHECK(b[i] == f.m.pba_byte(off + i));
        break;
      }
      case 4: {  // Message Control
        uint8_t c = in.u8();
        f.m.enabled = c & 1;
        f.m.function_mask = c & 2;
        f.table->set_control(f.m.enabled, f.m.function_mask);
        f.m.flush();
        break;
      }
      case 5:
      case 6:
        f.fire(static_cast<uint16_t>(in.u8() % (n + 2)));
        break;
      default:
        if (op & 0x80)
          f.reset();
        else
          f.round_trip();
        break;
    }
    f.check(ops % 16 == 15 || in.empty());
  }
  return 0;
}
