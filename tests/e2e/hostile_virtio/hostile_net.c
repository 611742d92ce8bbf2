// tern-hostile-net: a hostile virtio-net driver (virtio 1.2 §5.1) in guest user space, for
// tests/e2e/net_hostile_test.sh. Drives the virtio-net PCI function BDF (modern; unbound from
// virtio-pci) through virtio_user.h: receiveq0 (0), transmitq0 (1) and, when the device offers
// VIRTIO_NET_F_CTRL_VQ, the controlq (2); features VERSION_1, MAC, CTRL_VQ only (no MRG_RXBUF, no
// offloads: the header is 12 bytes, §5.1.6). The test host (L1) watches the tap and floods it;
// the two sides meet at steps: the driver prints
//   TERN-HOSTILE-NET-WAIT step=<s>
// and polls MAILBOX (a disk, read with O_DIRECT; L1 writes "GO <s>" into its image file) until it
// says "GO <s>". Phases, each printed as one "TERN-HOSTILE-NET phase=<p> ..." line:
//   tx-5, tx-hdr, tx-70k    TX chains of 5 bytes, a header only, 70 KiB of frame: each must come
//                           back in the used ring (id checked), nothing may reach the tap
//                           (steps tx-before / tx-bad: L1 compares the tap's rx counters)
//   tx-writable, tx-badgso  a device-writable buffer in a TX chain; a GSO header that was not
//                           negotiated (step tx-extra)
//   tx-good, tx-good1       a 60-byte broadcast frame (header and frame split, then in one
//                           descriptor): both reach the tap (step tx-good)
//   ctrl-short, ctrl-noack, ctrl-unknown, ctrl-mq-zero
//                           a 1-byte command; no ack byte; an unknown class; VQ_PAIRS_SET 0 without
//                           MQ: VIRTIO_NET_ERR (ack=1) or used length 0 expected
//   rx-small                every receiveq entry a 64-byte buffer, L1 sends 1000-byte frames (step
//                           rx-small): none may come back truncated (delivered frames are checked)
//   flood-rx                no RX buffer posted while L1 floods (step flood), then the ring filled
//                           with 2 KiB buffers: frames arrive, each buffer id comes back once per
//                           posting, no frame twice; READY step=flood-more, L1 sends a paced burst
//                           of FLOOD2 frames, the driver counts them until L1 says GO flood-done.
// Result lines:
//   TERN-HOSTILE-NET phase=<p> result=answered|needs_reset|pending id_ok=0|1 used_len=<n> [ack=<a>] status=0x<s> ms=<t>
//   TERN-HOSTILE-NET phase=rx-small result=... delivered=<n> truncated=<n> ours=<n> bad_ids=<n> status=0x<s>
//   TERN-HOSTILE-NET phase=flood-rx result=... tag1=<n> tag2=<n> want2=<n> dup=<n> bad_ids=<n> bad_frames=<n> status=0x<s>
// then (after step end) TERN-HOSTILE-NET-DONE phases=<n>. A device that set DEVICE_NEEDS_RESET is reset and set up
// again before the next phase.
// MODE vhost (tern with vhost=on; issue 31 items 5, 6): only these phases run, then step end:
//   vh-rx          MRG_RXBUF not negotiated (tern must serve the queues in userspace: vhost-net
//                  would leave num_buffers unwritten): 8 RX buffers with num_buffers preset to
//                  0xbeef; L1 sends 5 frames (step vh-rx); each delivered buffer must say 1
//                  (virtio 1.2 §5.1.6.4):  phase=vh-rx result=... delivered=<n> num_buffers_bad=<n>
// then MRG_RXBUF negotiated (vhost-net serves the queues), between steps vh-before and vh-done:
//   vh-good        a 60-byte frame (header and frame split): answered, on the tap
//   vh-writable    a device-writable buffer in a TX chain: vhost-net never returns it; the device
//                  must set NEEDS_RESET (result=needs_reset), and the driver sets it up again
//   vh-good-after  a 60-byte frame after that reset: answered, on the tap (the driver recovered)
// Usage: tern-hostile-net BDF MAILBOX [TIMEOUT_S [MODE]]   (static: gcc -static -O2)
#include "virtio_user.h"

#define NET_F_MAC (1ull << 5)
#define NET_F_MRG_RXBUF (1ull << 15)
#define NET_F_CTRL_VQ (1ull << 17)
#define NET_HDR 12u      // struct virtio_net_hdr with num_buffers (VERSION_1)
#define RX_SMALL 64u     // rx-small's buffers
#define RX_BIG 2048u     // flood-rx's buffers (>= 1526: §5.1.6.3.1 without MRG_RXBUF)
#define FLOOD_MAGIC 0x464e4854u  // "THNF" at the UDP payload's start (net_peer.c)
#define FLOOD2 100u      // frames of L1's second burst (tag 2)
#define MAX_SEQ 65536u

static unsigned timeout_s = 20;
static int vhost_mode;  // MODE vhost: vhost_phases() only
static int want_mrg;    // negotiate MRG_RXBUF (vhost_phases' second part)
static const char* mailbox;
static uint64_t acked;
static uint8_t mac[6];
static struct vu_queue rxq, txq, ctrlq;
static int have_ctrl;
static unsigned phases;

// Which heads of each queue the device holds (posted, not yet used): a used id that is not
// held is a buffer returned twice (or never posted).
struct held {
  uint8_t in[256];
  unsigned bad_ids;
};
static struct held rx_held, tx_held, ctrl_held;

static void post(struct vu_queue* q, struct held* h, uint16_t head) {
  h->in[head] = 1;
  vu_q_add(q, head);
}

// Checks used element i against h: returns 1 if its id was held (and releases it).
static int take(struct vu_queue* q, struct held* h, uint16_t i, uint32_t* id, uint32_t* len) {
  vu_q_used_elem(q, i, id, len);
  if (*id >= q->size || !h->in[*id]) {
    ++h->bad_ids;
    return 0;
  }
  h->in[*id] = 0;
  return 1;
}

static long ms_since(const struct timespec* t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

// --- the mailbox: L1 writes "GO <step>\n" at the start of the disk image ---
static uint8_t* mbox_buf;

// 1 if MAILBOX currently says "GO <step>".
static int mailbox_says(const char* step) {
  int fd = open(mailbox, O_RDONLY | O_DIRECT);
  if (fd < 0) die("open %s", mailbox);
  ssize_t n = pread(fd, mbox_buf, 512, 0);
  close(fd);
  if (n != 512) die("read %s", mailbox);
  size_t k = strlen(step);
  return memcmp(mbox_buf, "GO ", 3) == 0 && memcmp(mbox_buf + 3, step, k) == 0 &&
         (mbox_buf[3 + k] == '\n' || mbox_buf[3 + k] == ' ');
}

static void wait_step(const char* step) {
  printf("TERN-HOSTILE-NET-WAIT step=%s\n", step);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!mailbox_says(step)) {
    if (ms_since(&t0) > 600000) die("no GO %s from the test host in 600 s", step);
    usleep(200000);  // each look is a disk read through the VMM: few, not to load it
  }
}

// --- device setup ---
static void setup(void) {
  acked = vu_negotiate(NET_F_MAC | NET_F_CTRL_VQ | (want_mrg ? NET_F_MRG_RXBUF : 0));
  have_ctrl = (acked & NET_F_CTRL_VQ) != 0;
  for (unsigned i = 0; i < 6; ++i) mac[i] = (acked & NET_F_MAC) && devcfg ? devcfg[i] : (uint8_t)(i == 0 ? 2 : i);
  vu_queue_setup(&rxq, 0, 256);
  vu_queue_setup(&txq, 1, 256);
  if (have_ctrl) vu_queue_setup(&ctrlq, 2, 64);
  memset(&rx_held, 0, sizeof rx_held);
  memset(&tx_held, 0, sizeof tx_held);
  memset(&ctrl_held, 0, sizeof ctrl_held);
  vu_driver_ok();
}

static const char* outcome_name(enum vu_outcome o) {
  return o == VU_USED ? "answered" : o == VU_NEEDS_RESET ? "needs_reset" : "pending";
}

// Posts the chain d[0..n) (descriptors 0..n-1, NEXT links filled in here) on q, waits for its
// used element and prints the result line; ack: the byte to show as ack= (NULL: none). After
// NEEDS_RESET or a timeout the device is set up again.
static void one_chain(const char* phase, struct vu_queue* q, struct held* h, struct desc* d,
                      unsigned n, const volatile uint8_t* ack) {
  for (unsigned i = 0; i < n; ++i) {
    q->desc[i] = d[i];
    if (i + 1 < n) q->desc[i].flags |= DESC_F_NEXT, q->desc[i].next = (uint16_t)(i + 1);
  }
  uint16_t before = q->used_seen;
  post(q, h, 0);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  vu_q_publish(q, q->avail_idx);
  enum vu_outcome o = vu_q_wait_ms(q, 1, timeout_s * 1000u, 200);
  long ms = ms_since(&t0);
  uint32_t id = 0, len = 0;
  int id_ok = 0;
  if (o == VU_USED) id_ok = take(q, h, before, &id, &len) && id == 0 && q->used_seen == (uint16_t)(before + 1);
  char extra[32] = "";
  if (ack) snprintf(extra, sizeof extra, " ack=%u", *ack);
  printf("TERN-HOSTILE-NET phase=%s result=%s id_ok=%d used_len=%u%s status=0x%x ms=%ld\n", phase,
         outcome_name(o), id_ok, len, extra, vu_status(), ms);
  ++phases;
  if (o != VU_USED) setup();
}

// --- frames ---
static void eth_header(uint8_t* f, const uint8_t* dst, uint16_t type) {
  memcpy(f, dst, 6);
  memcpy(f + 6, mac, 6);
  f[12] = (uint8_t)(type >> 8);
  f[13] = (uint8_t)type;
}

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static void tx_phases(void) {
  uint8_t* hdr = pages(1);            // headers at 0, 64, 128; a header + frame at 256
  uint8_t* big = pages(18);           // 70 KiB of frame
  uint8_t* good = pages(1);           // a 60-byte frame at 0; 64 writable bytes at 2048
  uint64_t hp = phys(hdr), gp = phys(good);
  eth_header(big, bcast, 0x88b5);
  eth_header(good, bcast, 0x88b5);
  memcpy(good + 14, "TERN-HOSTILE-NET-GOOD", 21);
  memcpy(hdr + 256 + NET_HDR, good, 60);

  wait_step("tx-before");  // L1 reads the tap's rx counters
  struct desc five = {hp, 5, 0, 0};
  one_chain("tx-5", &txq, &tx_held, &five, 1, NULL);
  struct desc hdr_only = {hp, NET_HDR, 0, 0};
  one_chain("tx-hdr", &txq, &tx_held, &hdr_only, 1, NULL);
  struct desc k70[19];
  k70[0] = (struct desc){hp, NET_HDR, 0, 0};
  for (unsigned i = 0; i < 17; ++i) k70[1 + i] = (struct desc){phys(big + i * PAGE), PAGE, 0, 0};
  k70[18] = (struct desc){phys(big + 17 * PAGE), 2048, 0, 0};  // 17 * 4096 + 2048 = 70 KiB
  one_chain("tx-70k", &txq, &tx_held, k70, 19, NULL);
  wait_step("tx-bad");  // L1: nothing reached the tap

  struct desc wr[3] = {{hp, NET_HDR, 0, 0}, {gp, 60, 0, 0}, {gp + 2048, 64, DESC_F_WRITE, 0}};
  one_chain("tx-writable", &txq, &tx_held, wr, 3, NULL);
  // GSO_TCPV4 (1), hdr_len 54, gso_size 1000, NEEDS_CSUM: HOST_TSO4 / CSUM were not negotiated.
  uint8_t* g = hdr + 128;
  g[0] = 1, g[1] = 1, g[2] = 54, g[4] = 0xe8, g[5] = 0x03, g[6] = 34, g[8] = 16;
  struct desc gso[2] = {{hp + 128, NET_HDR, 0, 0}, {gp, 60, 0, 0}};
  one_chain("tx-badgso", &txq, &tx_held, gso, 2, NULL);
  wait_step("tx-extra");

  struct desc ok[2] = {{hp + 64, NET_HDR, 0, 0}, {gp, 60, 0, 0}};
  one_chain("tx-good", &txq, &tx_held, ok, 2, NULL);
  struct desc ok1 = {hp + 256, NET_HDR + 60, 0, 0};
  one_chain("tx-good1", &txq, &tx_held, &ok1, 1, NULL);
  wait_step("tx-good");  // L1: exactly these two frames reached the tap
}

static void vhost_rx_no_mrg(void) {
  uint8_t* buf = pages(4);  // 8 x 2 KiB
  for (uint16_t i = 0; i < 8; ++i) {
    uint8_t* b = buf + i * RX_BIG;
    memset(b, 0, NET_HDR);
    b[10] = 0xef, b[11] = 0xbe;  // num_buffers: the device must overwrite it with 1
    rxq.desc[i] = (struct desc){phys(b), RX_BIG, DESC_F_WRITE, 0};
    post(&rxq, &rx_held, i);
  }
  vu_q_publish(&rxq, rxq.avail_idx);
  wait_step("vh-rx");  // L1 sent its frames and saw them taken off the tap
  uint16_t before = rxq.used_seen;
  enum vu_outcome o = vu_q_wait_ms(&rxq, 1, timeout_s * 1000u, 1000);
  unsigned delivered = 0, nb_bad = 0;
  for (uint16_t i = before; o == VU_USED && i != rxq.used_seen; ++i) {
    uint32_t id, len;
    if (!take(&rxq, &rx_held, i, &id, &len)) continue;
    ++delivered;
    const uint8_t* b = buf + id * RX_BIG;
    if ((b[10] | b[11] << 8) != 1) ++nb_bad;
  }
  printf(
      "TERN-HOSTILE-NET phase=vh-rx result=%s delivered=%u num_buffers_bad=%u bad_ids=%u "
      "status=0x%x\n",
      o == VU_TIMEOUT ? "none" : outcome_name(o), delivered, nb_bad, rx_held.bad_ids, vu_status());
  ++phases;
}

static void vhost_phases(void) {
  vhost_rx_no_mrg();
  want_mrg = 1;
  setup();                   // a reset: now with MRG_RXBUF, served by vhost-net
  uint8_t* hdr = pages(1);   // a zero header at 0
  uint8_t* good = pages(1);  // a 60-byte frame at 0; 64 writable bytes at 2048
  uint64_t hp = phys(hdr), gp = phys(good);
  eth_header(good, bcast, 0x88b5);
  memcpy(good + 14, "TERN-HOSTILE-NET-GOOD", 21);
  wait_step("vh-before");  // L1 reads the tap's rx counters
  struct desc ok[2] = {{hp, NET_HDR, 0, 0}, {gp, 60, 0, 0}};
  one_chain("vh-good", &txq, &tx_held, ok, 2, NULL);
  struct desc wr[3] = {{hp, NET_HDR, 0, 0}, {gp, 60, 0, 0}, {gp + 2048, 64, DESC_F_WRITE, 0}};
  one_chain("vh-writable", &txq, &tx_held, wr, 3, NULL);
  one_chain("vh-good-after", &txq, &tx_held, ok, 2, NULL);
  wait_step("vh-done");  // L1: two frames on the tap, tern's counters
}

static void ctrl_phases(void) {
  if (!have_ctrl) {
    printf("TERN-HOSTILE-NET phase=ctrl result=skipped (VIRTIO_NET_F_CTRL_VQ not offered)\n");
    return;
  }
  uint8_t* c = pages(1);  // command at 0, ack at 2048
  uint64_t cp = phys(c);
  volatile uint8_t* ack = c + 2048;
  // short: the class byte only, then an ack byte
  c[0] = 0, *ack = 0xaa;
  struct desc s[2] = {{cp, 1, 0, 0}, {cp + 2048, 1, DESC_F_WRITE, 0}};
  one_chain("ctrl-short", &ctrlq, &ctrl_held, s, 2, ack);
  // noack: VIRTIO_NET_CTRL_RX (0) PROMISC (0) with its data byte, nothing device-writable
  c[0] = 0, c[1] = 0, c[2] = 1, *ack = 0xaa;
  struct desc na[2] = {{cp, 2, 0, 0}, {cp + 2, 1, 0, 0}};
  one_chain("ctrl-noack", &ctrlq, &ctrl_held, na, 2, ack);
  // unknown class 0xee, command 0x42
  c[0] = 0xee, c[1] = 0x42, *ack = 0xaa;
  struct desc u[2] = {{cp, 2, 0, 0}, {cp + 2048, 1, DESC_F_WRITE, 0}};
  one_chain("ctrl-unknown", &ctrlq, &ctrl_held, u, 2, ack);
  // VIRTIO_NET_CTRL_MQ (4) VQ_PAIRS_SET (0) with 0 pairs, MQ not negotiated
  c[0] = 4, c[1] = 0, c[2] = 0, c[3] = 0, *ack = 0xaa;
  struct desc mq[3] = {{cp, 2, 0, 0}, {cp + 2, 2, 0, 0}, {cp + 2048, 1, DESC_F_WRITE, 0}};
  one_chain("ctrl-mq-zero", &ctrlq, &ctrl_held, mq, 3, ack);
}

// 1 if frame f (n bytes, after the virtio header) is complete as far as its own lengths tell.
static int frame_complete(const uint8_t* f, uint32_t n) {
  if (n < 14) return 0;
  uint16_t type = (uint16_t)(f[12] << 8 | f[13]);
  if (type == 0x0800) return n >= 34 && (uint32_t)(f[16] << 8 | f[17]) + 14 <= n;
  if (type == 0x86dd) return n >= 54 && (uint32_t)(f[18] << 8 | f[19]) + 54 <= n;
  return 1;  // ARP and others: no length of their own to check
}

// 1 if f is one of net_peer.c's UDP frames; sets tag and seq.
static int ours(const uint8_t* f, uint32_t n, uint32_t* tag, uint32_t* seq) {
  if (n < 42 + 12 || f[12] != 0x08 || f[13] != 0x00 || f[23] != 17) return 0;
  uint32_t magic;
  memcpy(&magic, f + 42, 4);
  if (magic != FLOOD_MAGIC) return 0;
  memcpy(tag, f + 46, 4);
  memcpy(seq, f + 50, 4);
  return 1;
}

static void rx_small(void) {
  uint8_t* buf = pages(4);  // 256 x 64 bytes
  for (uint16_t i = 0; i < rxq.size; ++i) {
    rxq.desc[i] = (struct desc){phys(buf + i * RX_SMALL), RX_SMALL, DESC_F_WRITE, 0};
    post(&rxq, &rx_held, i);
  }
  vu_q_publish(&rxq, rxq.avail_idx);
  wait_step("rx-small");  // L1 sent its 1000-byte frames and saw tern take them off the tap
  unsigned delivered = 0, truncated = 0, mine = 0;
  uint16_t before = rxq.used_seen;
  enum vu_outcome o = vu_q_wait_ms(&rxq, 1, 1000, 1000);
  for (uint16_t i = before; o == VU_USED && i != rxq.used_seen; ++i) {
    uint32_t id, len, tag, seq;
    if (!take(&rxq, &rx_held, i, &id, &len)) continue;
    ++delivered;
    const uint8_t* f = buf + id * RX_SMALL + NET_HDR;
    uint32_t n = len > NET_HDR ? len - NET_HDR : 0;
    if (len > RX_SMALL || !frame_complete(f, n)) ++truncated;
    if (ours(f, n, &tag, &seq)) ++mine;
  }
  printf("TERN-HOSTILE-NET phase=rx-small result=%s delivered=%u truncated=%u ours=%u bad_ids=%u status=0x%x\n",
         o == VU_TIMEOUT ? "none" : outcome_name(o), delivered, truncated, mine, rx_held.bad_ids, vu_status());
  ++phases;
}

static uint8_t seen1[MAX_SEQ / 8], seen2[MAX_SEQ / 8];

static void flood(void) {
  setup();  // a reset: the 64-byte buffers go away; no RX buffer now
  wait_step("flood");  // L1 flooded the tap and measured tern's CPU time meanwhile
  uint8_t* buf = pages(128);  // 256 x 2 KiB
  for (uint16_t i = 0; i < rxq.size; ++i) {
    rxq.desc[i] = (struct desc){phys(buf + i * RX_BIG), RX_BIG, DESC_F_WRITE, 0};
    post(&rxq, &rx_held, i);
  }
  vu_q_publish(&rxq, rxq.avail_idx);
  unsigned tag1 = 0, tag2 = 0, dup = 0, bad = 0, other = 0;
  int ready = 0, done = 0;
  enum vu_outcome o = VU_TIMEOUT;
  struct timespec quiet, since_done, since_mbox;
  clock_gettime(CLOCK_MONOTONIC, &quiet);
  since_mbox = quiet;
  for (;;) {
    uint16_t before = rxq.used_seen;
    o = vu_q_wait_ms(&rxq, 1, 0, 0);
    if (o == VU_NEEDS_RESET) break;
    if (o == VU_USED) {
      for (uint16_t i = before; i != rxq.used_seen; ++i) {
        uint32_t id, len, tag, seq;
        if (!take(&rxq, &rx_held, i, &id, &len)) continue;
        const uint8_t* f = buf + id * RX_BIG + NET_HDR;
        uint32_t n = len > NET_HDR ? len - NET_HDR : 0;
        if (len > RX_BIG || len < NET_HDR + 14 || !frame_complete(f, n)) {
          ++bad;
        } else if (ours(f, n, &tag, &seq) && (tag == 1 || tag == 2) && seq < MAX_SEQ) {
          uint8_t* seen = tag == 1 ? seen1 : seen2;
          if (seen[seq / 8] & (1u << seq % 8)) ++dup;
          seen[seq / 8] |= (uint8_t)(1u << seq % 8);
          for (uint32_t k = 54; k < n; ++k)
            if (f[k] != (uint8_t)(seq + k)) { ++bad; break; }
          if (tag == 1) ++tag1; else ++tag2;
        } else {
          ++other;
        }
        post(&rxq, &rx_held, (uint16_t)id);  // the same buffer again
      }
      vu_q_publish(&rxq, rxq.avail_idx);
      clock_gettime(CLOCK_MONOTONIC, &quiet);
    } else {
      usleep(1000);
    }
    if (!ready && ms_since(&quiet) > 1000) {  // the tap's backlog is drained
      printf("TERN-HOSTILE-NET-READY step=flood-more tag1=%u\n", tag1);
      ready = 1;
    }
    if (ready && !done && ms_since(&since_mbox) > 50) {
      clock_gettime(CLOCK_MONOTONIC, &since_mbox);
      if (mailbox_says("flood-done")) done = 1, since_done = since_mbox;
    }
    if (done && (tag2 >= FLOOD2 || ms_since(&since_done) > 5000)) break;
  }
  printf("TERN-HOSTILE-NET phase=flood-rx result=%s tag1=%u tag2=%u want2=%u dup=%u bad_ids=%u bad_frames=%u other=%u status=0x%x\n",
         o == VU_NEEDS_RESET ? "needs_reset" : "answered", tag1, tag2, FLOOD2, dup, rx_held.bad_ids, bad, other,
         vu_status());
  ++phases;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 3) die("usage: tern-hostile-net BDF MAILBOX [TIMEOUT_S]");
  mailbox = argv[2];
  if (argc > 3) timeout_s = (unsigned)atoi(argv[3]);
  vhost_mode = argc > 4 && strcmp(argv[4], "vhost") == 0;
  mbox_buf = pages(1);
  vu_open(argv[1]);
  setup();
  printf("TERN-HOSTILE-NET-READY bdf=%s features=0x%llx rxq=%u txq=%u ctrlq=%u mac=%02x:%02x:%02x:%02x:%02x:%02x\n",
         argv[1], (unsigned long long)acked, rxq.size, txq.size, have_ctrl ? ctrlq.size : 0, mac[0], mac[1],
         mac[2], mac[3], mac[4], mac[5]);
  if (vhost_mode) {
    vhost_phases();
  } else {
    tx_phases();
    ctrl_phases();
    rx_small();
    flood();
  }
  wait_step("end");  // L1 reads tern's stats with the device still in use
  vu_reset();
  printf("TERN-HOSTILE-NET-DONE phases=%u\n", phases);
  return 0;
}
