#include "notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#ifdef MOQD_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

void notify_systemd(const char* state) {
#ifdef MOQD_HAVE_SYSTEMD
  sd_notify(0, state);
#else
  const char* path = getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') {
    return;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = strlen(path);
  if (len >= sizeof addr.sun_path) {
    return;
  }
  memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract namespace
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return;
  }
  (void)sendto(fd, state, strlen(state), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
               static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
  close(fd);
#endif
}
