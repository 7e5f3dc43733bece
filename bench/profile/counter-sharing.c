/* Counter sharing: two threads pinned to CPUs 0 and 1 bump two 64-bit counters
 * each, 20 M times, in three ways: slots of one shared block (nifsock's stats
 * before they were per thread), atomic adds to a line per thread, and a load
 * and a store to a line per thread (what they are now). Prints ns per pair of
 * bumps. Build: gcc -O2 -o /tmp/counter-sharing bench/profile/counter-sharing.c -lpthread */
#define _GNU_SOURCE
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#define N 20000000
static _Alignas(64) uint64_t block[32];          /* like the stats block: adjacent slots */
static _Alignas(64) uint64_t apart[2][8];        /* one line per thread */
static int mode;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void *run(void *a) {
  long id = (long)a; cpu_set_t s; CPU_ZERO(&s); CPU_SET(id, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s);
  for (long i = 0; i < N; i++) {
    if (mode == 0) { __atomic_fetch_add(&block[4 + 3 * id], 1, __ATOMIC_RELAXED); __atomic_fetch_add(&block[5 + 3 * id], 100, __ATOMIC_RELAXED); }
    else if (mode == 1) { __atomic_fetch_add(&apart[id][0], 1, __ATOMIC_RELAXED); __atomic_fetch_add(&apart[id][1], 100, __ATOMIC_RELAXED); }
    else { uint64_t v = __atomic_load_n(&apart[id][0], __ATOMIC_RELAXED); __atomic_store_n(&apart[id][0], v + 1, __ATOMIC_RELAXED);
           v = __atomic_load_n(&apart[id][1], __ATOMIC_RELAXED); __atomic_store_n(&apart[id][1], v + 100, __ATOMIC_RELAXED); }
  }
  return NULL;
}
int main(void) {
  const char *name[] = {"shared block, 2 threads", "a line per thread, atomic add", "a line per thread, load+store"};
  for (int r = 0; r < 2; r++) for (mode = 0; mode < 3; mode++) {
    pthread_t t[2]; double t0 = now();
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, run, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("%-32s %.1f ns per pair of bumps\n", name[mode], (now() - t0) / N * 1e9);
  }
  return 0;
}
