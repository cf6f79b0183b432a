/* connload: the two ends of test/bench/uproxy_vs_haproxy.sh, built by it.
 *
 *   connload serve PORT             answer every TCP connection with "ok\n"
 *                                   and close it (several threads)
 *   connload run IP PORT THREADS S  closed loop for S seconds: each thread
 *                                   connects, reads to EOF, closes, again;
 *                                   prints "conns N failed F conns_per_s R"
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
        if (argc != 6 || strcmp(argv[1], "run") != 0) {
                fprintf(stderr, "usage: connload serve PORT | run IP PORT THREADS SECONDS\n");
                return 2;
        }
        target.sin_family = AF_INET;
        target.sin_port = htons((uint16_t)atoi(argv[3]));
        if (inet_pton(AF_INET, argv[2], &target.sin_addr) != 1)
                return 2;
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
