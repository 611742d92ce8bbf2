// A vhost-user "back-end" that accepts connections on a Unix socket and never answers
// (tests/e2e/vhost_user_test.sh, case "silent"): tern's front-end must give up on its handshake in
// bounded time, naming the socket and the request. Reads and discards what arrives; a connection
// that ends is closed and the next one accepted.
// Usage: vhost_user_silent SOCKET_PATH   (prints "listening" once the socket accepts connections)
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2 || strlen(argv[1]) >= sizeof(((struct sockaddr_un*)0)->sun_path)) {
    fprintf(stderr, "usage: %s SOCKET_PATH\n", argv[0]);
    return 2;
  }
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  strcpy(addr.sun_path, argv[1]);
  unlink(argv[1]);
  if (s < 0 || bind(s, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(s, 4) != 0) {
    perror("vhost_user_silent: socket");
    return 1;
  }
  printf("listening\n");
  fflush(stdout);
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) continue;
    char buf[4096];
    unsigned long got = 0;
    ssize_t n;
    while ((n = read(c, buf, sizeof buf)) > 0) got += (unsigned long)n;
    printf("connection closed after %lu bytes\n", got);
    fflush(stdout);
    close(c);
  }
}
