/* A fault for the hang watch's GPU checks (ci/gpu-hang.sh), loaded with LD_PRELOAD into one
 * rank: that process' NCCL network data connections stop carrying data, or carry it slowly,
 * while everything else (NCCL's bootstrap, our heartbeats) goes on.
 *
 * How a data connection is told apart: the connecting side of every NCCL socket sends an
 * 8-byte magic and then its 4-byte socket type; type 3 is a network data socket (NCCL's
 * socket.h, 2.17 to 2.32). Each connected descriptor's first two sends are looked at; a
 * descriptor whose second send is the 4-byte value 3 is marked.
 *
 * HANGSHIM_AFTER_MS=N  sends on marked descriptors fail with EAGAIN from N ms after the
 *                      process started, forever (a link that stops);
 * HANGSHIM_DELAY_US=N  every send on a marked descriptor waits N us first (a slow link).
 * HANGSHIM_QUIET=1     no line on stderr when the stall begins.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 65536

static unsigned char sends_seen[MAX_FD];
static unsigned char marked[MAX_FD];
static long after_ms = -1;
static long delay_us = 0;
static int quiet = 0;
static int announced = 0;
static struct timespec started;
static ssize_t (*real_send)(int, const void *, size_t, int);
static int (*real_connect)(int, const struct sockaddr *, socklen_t);

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}

__attribute__((constructor)) static void init(void) {
  clock_gettime(CLOCK_MONOTONIC, &started);
  after_ms = env_long("HANGSHIM_AFTER_MS", -1);
  delay_us = env_long("HANGSHIM_DELAY_US", 0);
  quiet = (int)env_long("HANGSHIM_QUIET", 0);
  real_send = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
  real_connect = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
}

static long elapsed_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - started.tv_sec) * 1000 + (now.tv_nsec - started.tv_nsec) / 1000000;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
  if (fd >= 0 && fd < MAX_FD) {
    sends_seen[fd] = 0;
    marked[fd] = 0;
  }
  return real_connect(fd, addr, len);
}

ssize_t send(int fd, const void *buf, size_t len, int flags) {
  if (fd < 0 || fd >= MAX_FD) return real_send(fd, buf, len, flags);
  if (sends_seen[fd] < 2) {
    if (sends_seen[fd] == 1 && len == 4) {
      int32_t type;
      memcpy(&type, buf, 4);
      if (type == 3) marked[fd] = 1;
    }
    sends_seen[fd]++;
    return real_send(fd, buf, len, flags);
  }
  if (!marked[fd]) return real_send(fd, buf, len, flags);
  if (after_ms >= 0 && elapsed_ms() >= after_ms) {
    if (!announced && !quiet) {
      announced = 1;
      fprintf(stderr, "hang-shim: pid %d: network data sends stop now (%ld ms)\n", (int)getpid(),
              elapsed_ms());
    }
    errno = EAGAIN;
    return -1;
  }
  if (delay_us > 0) usleep((useconds_t)delay_us);
  return real_send(fd, buf, len, flags);
}
