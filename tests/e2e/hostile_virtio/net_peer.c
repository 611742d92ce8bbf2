// tern-net-peer: the test host's (L1's) side of tests/e2e/net_hostile_test.sh. Sends COUNT
// Ethernet/IPv4/UDP frames of FRAME bytes out of the tap IFACE (an AF_PACKET socket: the frames
// go to whoever reads the tap, i.e. the VMM, and on to the guest) to DSTMAC, 169.254.77.1:5000 ->
// 169.254.77.2:6000, pausing GAP_US microseconds between frames (0: as fast as sendto goes). The
// UDP payload is "THNF" (little-endian 0x464e4854), TAG and the frame's sequence number (both
// u32, little-endian), then byte k of the frame = (seq + k) & 0xff (hostile_net.c checks it).
// Prints
//   TERN-NET-PEER tag=<t> sent=<n> errors=<n> ms=<t> first_error=<errno text>
// Usage: tern-net-peer IFACE DSTMAC TAG COUNT FRAME [GAP_US]   (static: gcc -static -O2)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint16_t ip_checksum(const uint8_t* p, size_t n) {
  uint32_t s = 0;
  for (size_t i = 0; i + 1 < n; i += 2) s += (uint32_t)(p[i] << 8 | p[i + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return (uint16_t)~s;
}

static int parse_mac(const char* s, uint8_t* m) {
  unsigned v[6];
  if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) return -1;
  for (int i = 0; i < 6; ++i) m[i] = (uint8_t)v[i];
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: tern-net-peer IFACE DSTMAC TAG COUNT FRAME [GAP_US]\n");
    return 2;
  }
  uint8_t dst[6], src[6] = {0x02, 0, 0, 0, 0x77, 1};
  uint32_t tag = (uint32_t)strtoul(argv[3], NULL, 0);
  unsigned count = (unsigned)strtoul(argv[4], NULL, 0), size = (unsigned)strtoul(argv[5], NULL, 0);
  unsigned gap = argc > 6 ? (unsigned)strtoul(argv[6], NULL, 0) : 0;
  if (parse_mac(argv[2], dst) || size < 54 || size > 1514) {
    fprintf(stderr, "tern-net-peer: bad DSTMAC or FRAME (54..1514)\n");
    return 2;
  }
  char path[128];
  snprintf(path, sizeof path, "/sys/class/net/%s/address", argv[1]);
  FILE* a = fopen(path, "r");
  char line[64];
  if (a && fgets(line, sizeof line, a)) parse_mac(line, src);
  if (a) fclose(a);
  int fd = socket(AF_PACKET, SOCK_RAW, 0);  // protocol 0: send only
  unsigned ifindex = if_nametoindex(argv[1]);
  if (fd < 0 || ifindex == 0) {
    fprintf(stderr, "tern-net-peer: socket/%s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  struct sockaddr_ll to = {.sll_family = AF_PACKET, .sll_ifindex = (int)ifindex, .sll_halen = 6};
  memcpy(to.sll_addr, dst, 6);
  static uint8_t f[1514];
  memcpy(f, dst, 6);
  memcpy(f + 6, src, 6);
  f[12] = 0x08, f[13] = 0x00;
  uint8_t* ip = f + 14;
  unsigned ip_len = size - 14, udp_len = ip_len - 20;
  ip[0] = 0x45, ip[2] = (uint8_t)(ip_len >> 8), ip[3] = (uint8_t)ip_len, ip[6] = 0x40, ip[8] = 64, ip[9] = 17;
  uint8_t sip[4] = {169, 254, 77, 1}, dip[4] = {169, 254, 77, 2};
  memcpy(ip + 12, sip, 4);
  memcpy(ip + 16, dip, 4);
  uint8_t* udp = ip + 20;
  udp[0] = 5000 >> 8, udp[1] = 5000 & 0xff, udp[2] = 6000 >> 8, udp[3] = 6000 & 0xff;
  udp[4] = (uint8_t)(udp_len >> 8), udp[5] = (uint8_t)udp_len;  // UDP checksum 0: none
  uint32_t magic = 0x464e4854u;
  memcpy(udp + 8, &magic, 4);
  memcpy(udp + 12, &tag, 4);
  unsigned sent = 0, errors = 0;
  int first_errno = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint32_t seq = 0; seq < count; ++seq) {
    ip[4] = (uint8_t)(seq >> 8), ip[5] = (uint8_t)seq;  // identification
    ip[10] = ip[11] = 0;
    uint16_t c = ip_checksum(ip, 20);
    ip[10] = (uint8_t)(c >> 8), ip[11] = (uint8_t)c;
    memcpy(udp + 16, &seq, 4);
    for (unsigned k = 54; k < size; ++k) f[k] = (uint8_t)(seq + k);
    if (sendto(fd, f, size, 0, (struct sockaddr*)&to, sizeof to) == (ssize_t)size) {
      ++sent;
    } else {
      if (!errors) first_errno = errno;
      ++errors;
    }
    if (gap) usleep(gap);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  printf("TERN-NET-PEER tag=%u sent=%u errors=%u ms=%ld first_error=%s\n", tag, sent, errors, ms,
         first_errno ? strerror(first_errno) : "none");
  return 0;
}
