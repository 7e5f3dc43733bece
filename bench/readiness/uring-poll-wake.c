/*
 * Can an io_uring multishot POLL_ADD serve as the readiness set's source, its
 * completions read from the shared ring by whichever scheduler runs the
 * readiness port, with no system call? This probe answers the question the
 * readiness notes left open (doc/readiness-research.md, "io_uring as the
 * set's source").
 *
 * Thread S creates a ring, submits one multishot POLL_ADD (POLLIN) on one end
 * of a TCP connection over loopback, and then sleeps in epoll_wait on an eventfd nobody writes
 * (as an idle ERTS scheduler sleeps in its pollset; the timeout is 200 ms).
 * The main thread, another thread, writes a byte to the pair's other end ten
 * times; after each write it polls the ring fd (50 ms) and looks at the
 * completion queue from user space, then reads the byte back.
 *
 * Printed per ring setup: how often the ring fd polled readable, how many of
 * the ten completions the other thread found in the ring, and how S's
 * epoll_wait calls ended (EINTR, or their timeout).
 *
 *   apt-get install -y liburing-dev
 *   gcc -O2 -o /tmp/uring-poll-wake bench/readiness/uring-poll-wake.c -luring -lpthread
 *   /tmp/uring-poll-wake
 *
 * Not built by the Makefile, not needed by anything else: a measurement kept
 * so that it can be repeated.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG (1U << 9)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

struct run {
    unsigned flags;
    struct io_uring ring;
    int pair[2];
    int setup_error;
    volatile int ready;
    volatile int stop;
    int eintr, timeouts;
};

static void *submitter(void *arg)
{
    struct run *r = arg;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = r->flags;
    int e = io_uring_queue_init_params(64, &r->ring, &p);
    if (e < 0) {
        r->setup_error = -e;
        r->ready = 1;
        return NULL;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    io_uring_prep_poll_multishot(sqe, r->pair[0], POLLIN);
    sqe->user_data = 42;
    io_uring_submit(&r->ring);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int efd = eventfd(0, EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    r->ready = 1;
    while (!r->stop) {
        struct epoll_event out;
        int n = epoll_wait(ep, &out, 1, 200);
        if (n < 0 && errno == EINTR)
            r->eintr++;
        else if (n == 0)
            r->timeouts++;
    }
    close(ep);
    close(efd);
    return NULL;
}

/* A connected TCP pair over loopback: pair[0] accepted, pair[1] the client. */
static void tcp_pair(int pair[2])
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) < 0) {
        perror("listen");
        exit(1);
    }
    pair[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (pair[1] < 0 || connect(pair[1], (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        exit(1);
    }
    pair[0] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (pair[0] < 0) {
        perror("accept");
        exit(1);
    }
    setsockopt(pair[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(l);
}

static void probe(unsigned flags, const char *name)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.flags = flags;
    tcp_pair(r.pair);
    pthread_t t;
    pthread_create(&t, NULL, submitter, &r);
    while (!r.ready)
        usleep(1000);
    if (r.setup_error) {
        printf("%-40s io_uring_setup failed: %s\n", name, strerror(r.setup_error));
        r.stop = 1;
        pthread_join(t, NULL);
        return;
    }
    usleep(100000); /* S is asleep in epoll_wait */
    int readable = 0, seen = 0;
    for (int i = 0; i < 10; i++) {
        char c = 'x', b[16];
        if (write(r.pair[1], &c, 1) != 1)
            perror("write");
        struct pollfd pf = {.fd = r.ring.ring_fd, .events = POLLIN};
        if (poll(&pf, 1, 50) > 0)
            readable++;
        /* the completion queue, read from this thread without a system call */
        unsigned head = *r.ring.cq.khead;
        unsigned tail = __atomic_load_n(r.ring.cq.ktail, __ATOMIC_ACQUIRE);
        if (tail != head) {
            seen += (int)(tail - head);
            __atomic_store_n(r.ring.cq.khead, tail, __ATOMIC_RELEASE);
        }
        if (read(r.pair[0], b, sizeof b) < 0)
            perror("read");
        usleep(20000);
    }
    r.stop = 1;
    pthread_join(t, NULL);
    printf("%-40s ring fd readable %2d/10, completions in the ring %2d/10; "
           "the submitter's epoll_wait: %2d EINTR, %2d timeouts\n",
           name, readable, seen, r.eintr, r.timeouts);
    io_uring_queue_exit(&r.ring);
    close(r.pair[0]);
    close(r.pair[1]);
}

int main(void)
{
    probe(0, "default (TWA_SIGNAL)");
    probe(IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN");
    probe(IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
          "COOP_TASKRUN|TASKRUN_FLAG");
    probe(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
          "SINGLE_ISSUER|DEFER_TASKRUN");
    return 0;
}
