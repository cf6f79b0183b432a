/* The HTTP server over plain HTTP on loopback: routing data, bodies, the
 * body cap, keep-alive, large responses, configuration errors. (TLS, the
 * certificate reload and TLS >= 1.2 are covered by test/integration.) */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cmocka.h>

#include <svcenv/httpd.h>
#include <svcenv/strbuf.h>

#define BIG (600 * 1024)

struct seen {
        int calls;
        char method[8];
        char path[64];
        char query[64];
        char ctype[64];
        size_t len;
        unsigned sum;
};

static struct seen seen;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER; /* several loops */

static void handler(void *data, const struct se_httpd_request *req, struct se_httpd_response *resp)
{
        (void)data;
        pthread_mutex_lock(&seen_lock);
        seen.calls++;
        snprintf(seen.method, sizeof(seen.method), "%s", req->method);
        snprintf(seen.path, sizeof(seen.path), "%s", req->path);
        snprintf(seen.query, sizeof(seen.query), "%s", req->query);
        snprintf(seen.ctype, sizeof(seen.ctype), "%s", req->content_type);
        seen.len = req->len;
        seen.sum = 0;
        for (size_t i = 0; i < req->len; i++)
                seen.sum += (unsigned char)req->body[i];
        pthread_mutex_unlock(&seen_lock);
        if (strcmp(req->path, "/big") == 0) {
                resp->body = malloc(BIG);
                memset(resp->body, 'x', BIG);
                resp->len = BIG;
        } else if (strcmp(req->path, "/missing") == 0) {
                resp->status = 404;
                resp->nosniff = true;
        } else {
                resp->body = strdup("hello");
                resp->len = 5;
        }
        resp->content_type = "text/plain";
}

static unsigned n_threads; /* 0: one loop (lws listens); more: our acceptor */

static struct se_httpd *start(size_t max_body)
{
        struct se_httpd_config cfg = { .address = "127.0.0.1",
                                       .port = 0,
                                       .max_body = max_body,
                                       .threads = n_threads,
                                       .handler = handler };
        struct se_httpd *h = NULL;
        struct se_diag d = { 0 };
        int r = se_httpd_start(&cfg, &h, &d);
        if (r < 0)
                fail_msg("start: %d %s", r, d.text);
        assert_true(se_httpd_port(h) > 0);
        memset(&seen, 0, sizeof(seen));
        return h;
}

static int dial(int port)
{
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct timeval tv = { .tv_sec = 5 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
        while (n) {
                ssize_t w = write(fd, p, n);
                if (w <= 0)
                        return; /* the server may close early (413) */
                p += w;
                n -= (size_t)w;
        }
}

/* Reads one response; returns the status, body length in *len. */
static int read_response(int fd, struct se_strbuf *sb, size_t *len)
{
        se_strbuf_reset(sb);
        char buf[65536];
        size_t hdr = 0, need = 0;
        for (;;) {
                ssize_t r = read(fd, buf, sizeof(buf));
                if (r <= 0)
                        return -1;
                se_strbuf_add(sb, buf, (size_t)r);
                if (!hdr) {
                        char *e = strstr(sb->buf, "\r\n\r\n");
                        if (!e)
                                continue;
                        hdr = (size_t)(e - sb->buf) + 4;
                        char *cl = strcasestr(sb->buf, "content-length:");
                        need = cl && cl < e ? strtoul(cl + 15, NULL, 10) : 0;
                }
                if (sb->len >= hdr + need)
                        break;
        }
        *len = need;
        return atoi(sb->buf + 9);
}

static void test_httpd__get_path_query_and_keep_alive(void **state)
{
        (void)state;
        struct se_httpd *h = start(0);
        int fd = dial(se_httpd_port(h));
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        const char req[] = "GET /livez?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n";
        size_t len = 0;
        for (int i = 0; i < 2; i++) { /* the same connection twice */
                send_all(fd, req, strlen(req));
                assert_int_equal(read_response(fd, &sb, &len), 200);
                assert_int_equal(len, 5);
                assert_non_null(strstr(sb.buf, "\r\n\r\nhello"));
                assert_null(strcasestr(sb.buf, "x-content-type-options"));
        }
        assert_int_equal(seen.calls, 2);
        assert_string_equal(seen.method, "GET");
        assert_string_equal(seen.path, "/livez");
        assert_string_equal(seen.query, "verbose=1");
        const char req404[] = "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n";
        send_all(fd, req404, strlen(req404));
        assert_int_equal(read_response(fd, &sb, &len), 404);
        assert_int_equal(len, 0);
        assert_non_null(strcasestr(sb.buf, "\r\nx-content-type-options: nosniff\r\n"));
        close(fd);
        se_strbuf_release(&sb);
        se_httpd_stop(h);
}

static void test_httpd__post_body_and_large_response(void **state)
{
        (void)state;
        struct se_httpd *h = start(0);
        int fd = dial(se_httpd_port(h));
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        size_t n = 300000;
        char *body = malloc(n);
        unsigned sum = 0;
        for (size_t i = 0; i < n; i++) {
                body[i] = (char)('a' + i % 26);
                sum += (unsigned char)body[i];
        }
        char head[256];
        int hn = snprintf(head, sizeof(head),
                          "POST /mutate?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          "application/json\r\nContent-Length: %zu\r\n\r\n",
                          n);
        send_all(fd, head, (size_t)hn);
        send_all(fd, body, n);
        size_t len = 0;
        assert_int_equal(read_response(fd, &sb, &len), 200);
        assert_string_equal(seen.method, "POST");
        assert_string_equal(seen.path, "/mutate");
        assert_string_equal(seen.query, "timeout=10s");
        assert_string_equal(seen.ctype, "application/json");
        assert_int_equal(seen.len, n);
        assert_int_equal(seen.sum, sum);

        const char big[] = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
        send_all(fd, big, strlen(big));
        assert_int_equal(read_response(fd, &sb, &len), 200);
        assert_int_equal(len, BIG);
        assert_int_equal(sb.buf[sb.len - 1], 'x');
        free(body);
        close(fd);
        se_strbuf_release(&sb);
        se_httpd_stop(h);
}

static void test_httpd__body_cap(void **state)
{
        (void)state;
        struct se_httpd *h = start(1024);
        int fd = dial(se_httpd_port(h));
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        char *body = calloc(1, 2000);
        memset(body, 'a', 2000);
        const char head[] = "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n";
        send_all(fd, head, strlen(head));
        send_all(fd, body, 2000);
        size_t len = 0;
        assert_int_equal(read_response(fd, &sb, &len), 413);
        assert_int_equal(seen.calls, 0);
        close(fd);

        /* at the cap exactly: served */
        fd = dial(se_httpd_port(h));
        const char ok_head[] = "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n";
        send_all(fd, ok_head, strlen(ok_head));
        send_all(fd, body, 1024);
        assert_int_equal(read_response(fd, &sb, &len), 200);
        assert_int_equal(seen.len, 1024);
        close(fd);
        free(body);
        se_strbuf_release(&sb);
        se_httpd_stop(h);
}

static void test_httpd__stalled_body_times_out(void **state)
{
        (void)state;
        struct se_httpd_config cfg = { .address = "127.0.0.1", .timeout_s = 1, .handler = handler };
        struct se_httpd *h = NULL;
        struct se_diag d = { 0 };
        assert_int_equal(se_httpd_start(&cfg, &h, &d), 0);
        memset(&seen, 0, sizeof(seen));
        int fd = dial(se_httpd_port(h)); /* reads give up after 5 s */
        const char part[] = "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc";
        send_all(fd, part, strlen(part));
        char buf[512];
        ssize_t r;
        do /* whatever the server says (maybe a 408), it must then close */
                r = read(fd, buf, sizeof(buf));
        while (r > 0);
        assert_int_equal(r, 0);
        assert_int_equal(seen.calls, 0);
        close(fd);
        se_httpd_stop(h);
}

static struct se_httpd *start_short(unsigned timeout_s)
{
        struct se_httpd_config cfg = { .address = "127.0.0.1",
                                       .timeout_s = timeout_s,
                                       .threads = n_threads,
                                       .handler = handler };
        struct se_httpd *h = NULL;
        struct se_diag d = { 0 };
        assert_int_equal(se_httpd_start(&cfg, &h, &d), 0);
        memset(&seen, 0, sizeof(seen));
        return h;
}

/* Reads what the server says until it closes; the status line's code, 0
 * when it closed without one, -1 when it still holds after the client's
 * 5 s read timeout. */
static int status_then_close(int fd)
{
        char buf[4096];
        size_t got = 0;
        for (int i = 0; i < 64; i++) { /* counted: at most 64 reads */
                ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
                if (r < 0)
                        return -1;
                if (r == 0)
                        break;
                got += (size_t)r;
                if (got == sizeof(buf) - 1)
                        got = 16; /* keep the status line */
        }
        buf[got] = '\0';
        return got >= 12 && strncmp(buf, "HTTP/1.", 7) == 0 ? atoi(buf + 9) : 0;
}

/* A WebSocket handshake on any path is refused (no 101), and the server
 * hangs up rather than keep an unauthenticated connection open. */
static void test_httpd__websocket_upgrade_refused(void **state)
{
        (void)state;
        struct se_httpd *h = start_short(1);
        const char *paths[] = { "/", "/mutate", "/metrics" };
        for (size_t i = 0; i < 3; i++) {
                int fd = dial(se_httpd_port(h));
                char req[512];
                int n = snprintf(req, sizeof(req),
                                 "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                                 "Connection: Upgrade\r\nSec-WebSocket-Key: "
                                 "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                                 paths[i]);
                send_all(fd, req, (size_t)n);
                int status = status_then_close(fd);
                assert_true(status == 400 || status == 0);
                close(fd);
        }
        /* nor HTTP/2 by upgrade: the handler may answer it as HTTP/1.1 */
        int fd = dial(se_httpd_port(h));
        const char h2c[] = "GET /x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                           "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
        send_all(fd, h2c, strlen(h2c));
        int status = status_then_close(fd);
        assert_true(status == 200 || status == 400 || status == 0);
        close(fd);
        assert_true(seen.calls <= 1);
        se_httpd_stop(h);
}

/* One body byte at a time, each within the idle timeout, does not hold a
 * request past its total deadline (1 s here): the client is told 408 or
 * cut off while it still has bytes to send. */
static void test_httpd__trickled_body_hits_the_request_deadline(void **state)
{
        (void)state;
        struct se_httpd *h = start_short(1);
        int fd = dial(se_httpd_port(h));
        const char head[] = "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n";
        send_all(fd, head, strlen(head));
        bool cut = false;
        for (int i = 0; i < 40 && !cut; i++) { /* 40 bytes, 300 ms apart: 12 s */
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 300) > 0) {
                        cut = true;
                        break;
                }
                if (send(fd, "x", 1, MSG_NOSIGNAL) != 1)
                        cut = true;
        }
        assert_true(cut);
        int status = status_then_close(fd);
        assert_true(status == 408 || status == 0);
        assert_int_equal(seen.calls, 0);
        close(fd);
        se_httpd_stop(h);
}

/* A connection that says nothing, or trickles its headers, is let go too. */
static void test_httpd__silent_and_trickled_headers_let_go(void **state)
{
        (void)state;
        struct se_httpd *h = start_short(1);
        int fd = dial(se_httpd_port(h)); /* reads give up after 5 s */
        assert_true(status_then_close(fd) >= 0);
        close(fd);
        fd = dial(se_httpd_port(h));
        const char head[] =
                "GET /x HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        bool cut = false;
        for (size_t i = 0; i < sizeof(head) - 1 && !cut; i++) { /* 300 ms apart: 20 s */
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 300) > 0 || send(fd, head + i, 1, MSG_NOSIGNAL) != 1)
                        cut = true;
        }
        assert_true(cut);
        close(fd);
        assert_int_equal(seen.calls, 0);
        se_httpd_stop(h);
}

/* A chunked body is answered at once (411: a length is required), and the
 * connection closed since its framing cannot be followed. */
static void test_httpd__chunked_body_refused(void **state)
{
        (void)state;
        struct se_httpd *h = start_short(10);
        int fd = dial(se_httpd_port(h)); /* reads give up after 5 s */
        const char req[] = "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
        send_all(fd, req, strlen(req));
        assert_int_equal(status_then_close(fd), 411);
        assert_int_equal(seen.calls, 0);
        close(fd);
        /* a POST with neither length nor chunks has an empty body (RFC 9112 6.3) */
        fd = dial(se_httpd_port(h));
        const char empty[] = "POST /mutate HTTP/1.1\r\nHost: x\r\n\r\n";
        send_all(fd, empty, strlen(empty));
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        size_t len = 0;
        assert_int_equal(read_response(fd, &sb, &len), 200);
        assert_int_equal(seen.calls, 1);
        assert_int_equal(seen.len, 0);
        se_strbuf_release(&sb);
        close(fd);
        se_httpd_stop(h);
}

static void test_httpd__config_errors(void **state)
{
        (void)state;
        struct se_httpd *h = NULL;
        struct se_diag d = { 0 };
        struct se_httpd_config cfg = { .address = "127.0.0.1", .handler = handler };
        cfg.cert_file = "/nonexistent/tls.crt";
        assert_int_equal(se_httpd_start(&cfg, &h, &d), -EINVAL); /* no key */
        cfg.key_file = "/nonexistent/tls.key";
        assert_true(se_httpd_start(&cfg, &h, &d) < 0);
        assert_non_null(strstr(d.file, "/nonexistent/tls.crt"));
        assert_null(h);
        cfg.cert_file = cfg.key_file = NULL;
        cfg.threads = SE_HTTPD_MAX_THREADS + 1;
        assert_int_equal(se_httpd_start(&cfg, &h, &d), -EINVAL);
        cfg.threads = 2;
        cfg.address = "not-an-address";
        assert_int_equal(se_httpd_start(&cfg, &h, &d), -EINVAL);
        assert_non_null(strstr(d.text, "not-an-address"));
        assert_null(h);
        assert_null(se_httpd_stop(NULL));
}

/* Several loops: many connections at once, each kept alive, every answer
 * on its own connection. */
static void test_httpd__threads_many_connections(void **state)
{
        (void)state;
        n_threads = 2;
        struct se_httpd *h = start(0);
        enum { N = 8 };
        int fds[N];
        for (int i = 0; i < N; i++)
                fds[i] = dial(se_httpd_port(h));
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        size_t len = 0;
        for (int round = 0; round < 3; round++) {
                for (int i = 0; i < N; i++) {
                        const char *req = i % 2 ? "GET /big HTTP/1.1\r\nHost: x\r\n\r\n" :
                                                  "GET /x HTTP/1.1\r\nHost: x\r\n\r\n";
                        send_all(fds[i], req, strlen(req));
                }
                for (int i = 0; i < N; i++) {
                        assert_int_equal(read_response(fds[i], &sb, &len), 200);
                        assert_int_equal(len, i % 2 ? BIG : 5);
                }
        }
        for (int i = 0; i < N; i++)
                close(fds[i]);
        se_strbuf_release(&sb);
        se_httpd_stop(h);
        n_threads = 0;
}

static int threaded(void **state)
{
        (void)state;
        n_threads = 3;
        return 0;
}

static int one_loop(void **state)
{
        (void)state;
        n_threads = 0;
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_httpd__get_path_query_and_keep_alive),
                cmocka_unit_test(test_httpd__post_body_and_large_response),
                cmocka_unit_test(test_httpd__body_cap),
                cmocka_unit_test(test_httpd__stalled_body_times_out),
                cmocka_unit_test(test_httpd__websocket_upgrade_refused),
                cmocka_unit_test(test_httpd__trickled_body_hits_the_request_deadline),
                cmocka_unit_test(test_httpd__chunked_body_refused),
                cmocka_unit_test(test_httpd__silent_and_trickled_headers_let_go),
                cmocka_unit_test(test_httpd__config_errors),
                cmocka_unit_test(test_httpd__threads_many_connections),
                /* the same with our acceptor and three loops */
                cmocka_unit_test_setup_teardown(test_httpd__get_path_query_and_keep_alive, threaded,
                                                one_loop),
                cmocka_unit_test_setup_teardown(test_httpd__post_body_and_large_response, threaded,
                                                one_loop),
                cmocka_unit_test_setup_teardown(test_httpd__body_cap, threaded, one_loop),
                cmocka_unit_test_setup_teardown(test_httpd__stalled_body_times_out, threaded,
                                                one_loop),
                cmocka_unit_test_setup_teardown(test_httpd__websocket_upgrade_refused, threaded,
                                                one_loop),
                cmocka_unit_test_setup_teardown(test_httpd__trickled_body_hits_the_request_deadline,
                                                threaded, one_loop),
                cmocka_unit_test_setup_teardown(test_httpd__chunked_body_refused, threaded,
                                                one_loop),
                cmocka_unit_test_setup_teardown(test_httpd__silent_and_trickled_headers_let_go,
                                                threaded, one_loop),
        };
        return cmocka_run_group_tests_name("httpd", tests, NULL, NULL);
}
