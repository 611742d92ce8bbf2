// vhost_user_inflight PID: how many descriptors of ring 0 the vhost-user inflight region mapped by
// process PID marks in flight (vhost-user spec "Inflight I/O tracking", split rings:
// QueueRegionSplit { u64 features; u16 version; u16 desc_num; u16 last_batch_head; u16 used_idx;
// DescStateSplit desc[desc_num] } with DescStateSplit { u8 inflight; u8 padding[5]; u16 next;
// u64 counter }). The region is the shared mapping of a memfd whose name contains "inflight"
// (tern's back-end and qemu-storage-daemon both name theirs so) in /proc/PID/maps, read through
// /proc/PID/mem. For tests/e2e/vhost_user_faults.sh: L1 stops the back-end (SIGSTOP) and counts
// the requests it has taken and not returned, so the test knows the kill leaves some to resubmit.
// Prints "inflight=N desc_num=M at=ADDR"; exits 1 (and prints the memfd mappings) when there is
// no region. Build: gcc -static -O2
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: vhost_user_inflight PID\n");
    return 2;
  }
  char path[64], line[512], name[320];
  snprintf(path, sizeof path, "/proc/%s/maps", argv[1]);
  FILE* maps = fopen(path, "r");
  if (!maps) {
    printf("error: cannot read %s\n", path);
    return 1;
  }
  snprintf(path, sizeof path, "/proc/%s/mem", argv[1]);
  int mem = open(path, O_RDONLY);
  if (mem < 0) {
    printf("error: cannot open %s\n", path);
    return 1;
  }
  char seen[1024] = "";
  while (fgets(line, sizeof line, maps)) {
    unsigned long start = 0, end = 0, offset = 0;
    char perms[8];
    name[0] = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %319[^\n]", &start, &end, perms, &offset, name) < 4)
      continue;
    if (strncmp(name, "/memfd:", 7) != 0) continue;
    if (strstr(name, "inflight") == NULL || offset != 0 || end - start < 16) {
      if (strlen(seen) + strlen(name) + 2 < sizeof seen) strcat(strcat(seen, " "), name);
      continue;
    }
    uint8_t hdr[16];
    if (pread(mem, hdr, sizeof hdr, (off_t)start) != (ssize_t)sizeof hdr) continue;
    uint16_t desc_num;
    memcpy(&desc_num, hdr + 10, 2);
    unsigned inflight = 0;
    for (unsigned i = 0; i < desc_num && 16 + 16 * (unsigned long)(i + 1) <= end - start; ++i) {
      uint8_t s;
      if (pread(mem, &s, 1, (off_t)(start + 16 + 16 * (unsigned long)i)) != 1) break;
      inflight += s == 1;
    }
    printf("inflight=%u desc_num=%u at=%lx\n", inflight, desc_num, start);
    return 0;
  }
  printf("error: no inflight memfd mapping in /proc/%s/maps (memfds:%s)\n", argv[1], seen);
  return 1;
}
