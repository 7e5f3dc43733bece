/* glibc's cancellable recv/send against syscall(2): an EAGAIN recv, then a send
 * and a recv on a unix socket pair, 3 M times each, in a process with a second
 * (idle) thread, as the VM always has. Prints ns per call. Build:
 * gcc -O2 -o /tmp/cancel-wrappers bench/profile/cancel-wrappers.c -lpthread; run
 * pinned: taskset -c 0 /tmp/cancel-wrappers */
#define _GNU_SOURCE
#include <stdio.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>
static void *idle(void *a) { (void)a; sleep(100); return NULL; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(void) {
  pthread_t th; pthread_create(&th, NULL, idle, NULL);
  int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  char b[64]; const int N = 3000000;
  for (int round = 0; round < 3; round++) {
    double t0 = now();
    for (int i = 0; i < N; i++) recv(sv[0], b, sizeof b, MSG_DONTWAIT);
    double t1 = now();
    for (int i = 0; i < N; i++) syscall(SYS_recvfrom, sv[0], b, sizeof b, MSG_DONTWAIT, NULL, NULL);
    double t2 = now();
    for (int i = 0; i < N; i++) { send(sv[1], "x", 1, 0); recv(sv[0], b, sizeof b, 0); }
    double t3 = now();
    for (int i = 0; i < N; i++) { syscall(SYS_sendto, sv[1], "x", 1, 0, NULL, 0); syscall(SYS_recvfrom, sv[0], b, sizeof b, 0, NULL, NULL); }
    double t4 = now();
    printf("EAGAIN recv: libc %.1f ns, syscall() %.1f ns | send+recv: libc %.1f ns, syscall() %.1f ns\n",
      (t1-t0)/N*1e9, (t2-t1)/N*1e9, (t3-t2)/N*1e9, (t4-t3)/N*1e9);
  }
  return 0;
}
