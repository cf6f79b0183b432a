/* connload: the two ends of test/bench/uproxy_vs_haproxy.sh, built by it.
 *
 *   connload serve PORT             answer every TCP connection with "ok\n"
 *                                   and close it (several threads)
 *   connload source PORT            send bytes to every TCP connection until
 *                                   it goes away (a thread each)
 *   connload run IP PORT THREADS S  closed loop for S seconds: each thread
 *                                   connects, reads to EOF, closes, again;
 *                                   prints "conns N failed F conns_per_s R"
 *   connload open IP PORT RATE S    open loop: RATE new connections a second
 *                                   for S seconds, started on schedule
 *                                   whatever the earlier ones do; the time
 *                                   from a connection's scheduled start to
 *                                   its first byte (so a stall counts for
 *                                   every connection it delays); prints
 *                                   "sent N ok K failed F p50_us A p99_us B"
 *   connload bulk IP PORT STREAMS S STREAMS connections read from a source
 *                                   for S seconds; prints "bytes B gbit_s G"
 * Every client connection ends with a reset (see run_loop).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in target;
static atomic_long done, failed;
static atomic_bool stop;

static void *serve_loop(void *data)
{
        int ls = *(int *)data;
        for (;;) {
                int c = accept(ls, NULL, NULL);
                if (c < 0)
                        continue;
                (void)!write(c, "ok\n", 3);
                close(c);
        }
        return NULL;
}

static int serve(int port)
{
        int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4096) < 0) {
                perror("connload serve");
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
                pthread_create(&t[i], NULL, serve_loop, &ls);
        serve_loop(&ls);
        return 0;
}

static void *source_conn(void *data)
{
        static char buf[1 << 16];
        int c = (int)(intptr_t)data;
        while (write(c, buf, sizeof(buf)) > 0)
                ;
        close(c);
        return NULL;
}

static int source(int port)
{
        int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 128) < 0) {
                perror("connload source");
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        for (;;) {
                int c = accept(ls, NULL, NULL);
                pthread_t t;
                if (c >= 0 && pthread_create(&t, NULL, source_conn, (void *)(intptr_t)c) == 0)
                        pthread_detach(t);
                else if (c >= 0)
                        close(c);
        }
        return 0;
}

static int64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void close_reset(int s)
{
        struct linger lg = { 1, 0 };
        setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        close(s);
}

#define OPEN_THREADS    2
#define OPEN_TIMEOUT_NS 5000000000LL
#define MAX_FD          65536

struct open_state {
        double rate; /* this thread's share */
        int64_t start, end;
        int64_t *lat; /* ns, one per connection that got its first byte */
        long n_lat, cap, sent, ok, failed;
        int64_t sched[MAX_FD]; /* per fd: the scheduled start; 0: none */
        int got[MAX_FD]; /* bytes read */
};

static void open_done(struct open_state *st, int fd, bool ok)
{
        close_reset(fd);
        st->sched[fd] = 0;
        if (ok)
                st->ok++;
        else
                st->failed++;
}

static void *open_loop(void *data)
{
        struct open_state *st = data;
        int ep = epoll_create1(0);
        struct epoll_event evs[256];
        int64_t interval = (int64_t)(1e9 / st->rate), next = st->start;
        char buf[64];
        long inflight = 0;
        for (;;) {
                int64_t now = now_ns();
                while (next <= now && next < st->end) {
                        int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
                        st->sent++;
                        if (s < 0 || s >= MAX_FD) {
                                if (s >= 0)
                                        close(s);
                                st->failed++;
                        } else if (connect(s, (struct sockaddr *)&target, sizeof(target)) < 0 &&
                                   errno != EINPROGRESS) {
                                close(s);
                                st->failed++;
                        } else {
                                struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP,
                                                          .data.fd = s };
                                epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
                                st->sched[s] = next;
                                st->got[s] = 0;
                                inflight++;
                        }
                        next += interval;
                }
                if (next >= st->end && inflight == 0)
                        break;
                if (now > st->end + OPEN_TIMEOUT_NS) { /* the rest timed out */
                        for (int fd = 0; fd < MAX_FD; fd++)
                                if (st->sched[fd])
                                        open_done(st, fd, false);
                        break;
                }
                int64_t wait = next < st->end ? next - now : 10000000;
                struct timespec ts = { 0, wait > 0 ? wait : 0 };
                int n = epoll_pwait2(ep, evs, 256, &ts, NULL);
                now = now_ns();
                for (int i = 0; i < n; i++) {
                        int fd = evs[i].data.fd;
                        ssize_t r;
                        while ((r = read(fd, buf, sizeof(buf))) > 0) {
                                if (st->got[fd] == 0 && st->n_lat < st->cap)
                                        st->lat[st->n_lat++] = now - st->sched[fd];
                                st->got[fd] += (int)r;
                        }
                        if (r == 0 || (r < 0 && errno != EAGAIN)) {
                                open_done(st, fd, r == 0 && st->got[fd] == 3);
                                inflight--;
                        }
                }
        }
        close(ep);
        return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? -1 : x > y;
}

static int open_run(double rate, int secs)
{
        static struct open_state st[OPEN_THREADS];
        pthread_t t[OPEN_THREADS];
        int64_t start = now_ns() + 10000000;
        long cap = (long)(rate * secs) + 16;
        for (int i = 0; i < OPEN_THREADS; i++) {
                st[i].rate = rate / OPEN_THREADS;
                /* the threads' schedules interleave */
                st[i].start = start + (int64_t)(1e9 / rate) * i;
                st[i].end = start + (int64_t)secs * 1000000000;
                st[i].cap = cap;
                if (!(st[i].lat = malloc((size_t)cap * sizeof(int64_t))))
                        return 1;
                pthread_create(&t[i], NULL, open_loop, &st[i]);
        }
        long sent = 0, ok = 0, failed = 0, n = 0;
        int64_t *all = malloc((size_t)cap * OPEN_THREADS * sizeof(int64_t));
        for (int i = 0; i < OPEN_THREADS; i++) {
                pthread_join(t[i], NULL);
                sent += st[i].sent;
                ok += st[i].ok;
                failed += st[i].failed;
                memcpy(all + n, st[i].lat, (size_t)st[i].n_lat * sizeof(int64_t));
                n += st[i].n_lat;
        }
        qsort(all, (size_t)n, sizeof(*all), cmp_i64);
        printf("sent %ld ok %ld failed %ld p50_us %.0f p99_us %.0f\n", sent, ok, failed,
               n ? all[n / 2] / 1e3 : -1.0, n ? all[(n * 99) / 100] / 1e3 : -1.0);
        return 0;
}

static atomic_long bulk_bytes;

static void *bulk_loop(void *data)
{
        static __thread char buf[1 << 18];
        int64_t end = *(int64_t *)data;
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct timeval tv = { 1, 0 };
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (connect(s, (struct sockaddr *)&target, sizeof(target)) < 0) {
                perror("connload bulk: connect");
                close(s);
                return NULL;
        }
        long got = 0;
        ssize_t r;
        while (now_ns() < end && (r = read(s, buf, sizeof(buf))) > 0)
                got += r;
        close_reset(s);
        atomic_fetch_add(&bulk_bytes, got);
        return NULL;
}

static int bulk(int streams, int secs)
{
        pthread_t t[64];
        int64_t t0 = now_ns(), end = t0 + (int64_t)secs * 1000000000;
        for (int i = 0; i < streams; i++)
                pthread_create(&t[i], NULL, bulk_loop, &end);
        for (int i = 0; i < streams; i++)
                pthread_join(t[i], NULL);
        double el = (double)(now_ns() - t0) / 1e9;
        printf("bytes %ld gbit_s %.2f\n", atomic_load(&bulk_bytes),
               (double)atomic_load(&bulk_bytes) * 8 / el / 1e9);
        return 0;
}

static void *run_loop(void *data)
{
        char buf[64];
        (void)data;
        while (!atomic_load(&stop)) {
                int s = socket(AF_INET, SOCK_STREAM, 0);
                struct timeval tv = { 5, 0 };
                setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                bool ok = connect(s, (struct sockaddr *)&target, sizeof(target)) == 0;
                ssize_t n, got = 0;
                while (ok && (n = read(s, buf, sizeof(buf))) > 0)
                        got += n;
                /* a reset, not a FIN: the server's side of the four-tuple
                 * does not sit in TIME_WAIT, where a reused client port
                 * would meet it again (that throttled DNAT runs to ~500/s) */
                struct linger lg = { 1, 0 };
                setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
                close(s);
                if (ok && got == 3)
                        atomic_fetch_add(&done, 1);
                else
                        atomic_fetch_add(&failed, 1);
        }
        return NULL;
}

int main(int argc, char **argv)
{
        if (argc == 3 && strcmp(argv[1], "serve") == 0)
                return serve(atoi(argv[2]));
        if (argc == 3 && strcmp(argv[1], "source") == 0)
                return source(atoi(argv[2]));
        if (argc != 6 || (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "open") != 0 &&
                          strcmp(argv[1], "bulk") != 0)) {
                fprintf(stderr, "usage: connload serve PORT | source PORT | run IP PORT THREADS "
                                "SECONDS | open IP PORT RATE SECONDS | bulk IP PORT STREAMS "
                                "SECONDS\n");
                return 2;
        }
        target.sin_family = AF_INET;
        target.sin_port = htons((uint16_t)atoi(argv[3]));
        if (inet_pton(AF_INET, argv[2], &target.sin_addr) != 1)
                return 2;
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) { /* open loop: many in flight */
                rl.rlim_cur = rl.rlim_max < MAX_FD ? rl.rlim_max : MAX_FD;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (strcmp(argv[1], "open") == 0) {
                double rate = atof(argv[4]);
                int secs = atoi(argv[5]);
                if (rate < OPEN_THREADS || rate > 1e6 || secs < 1 || secs > 600)
                        return 2;
                return open_run(rate, secs);
        }
        if (strcmp(argv[1], "bulk") == 0) {
                int streams = atoi(argv[4]), secs = atoi(argv[5]);
                if (streams < 1 || streams > 64 || secs < 1 || secs > 600)
                        return 2;
                return bulk(streams, secs);
        }
        int threads = atoi(argv[4]), secs = atoi(argv[5]);
        if (threads < 1 || threads > 256 || secs < 1)
                return 2;
        pthread_t t[256];
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < threads; i++)
                pthread_create(&t[i], NULL, run_loop, NULL);
        sleep((unsigned)secs);
        atomic_store(&stop, true);
        for (int i = 0; i < threads; i++)
                pthread_join(t[i], NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        printf("conns %ld failed %ld conns_per_s %.0f\n", atomic_load(&done), atomic_load(&failed),
               (double)atomic_load(&done) / el);
        return 0;
}
