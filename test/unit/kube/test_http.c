/* The HTTP client against a scripted server on 127.0.0.1: retries and
 * Retry-After, which verbs are retried, body cap, headers, cancellation from
 * another thread, a watch stream cut at odd places ending in 410. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <svcenv/kube.h>
#include <svcenv/kube_client.h>
#include <svcenv/kube_events.h>
#include <svcenv/kube_watch.h>
#include <svcenv/timeutil.h>

struct reply {
        const char *head; /* status line and headers, without the blank line */
        const char *body; /* sent in pieces of `piece` bytes; NULL: hang */
        size_t piece;
};

struct server {
        int fd;
        int port;
        const struct reply *script;
        size_t n_script;
        atomic_size_t served;
        char last_request[2048];
        atomic_bool stop;
        pthread_t thread;
};

static void *serve(void *arg)
{
        struct server *s = arg;
        while (!atomic_load(&s->stop)) {
                int c = accept(s->fd, NULL, NULL);
                if (c < 0)
                        continue;
                char req[2048];
                size_t n = 0;
                while (n < sizeof(req) - 1) {
                        ssize_t k = read(c, req + n, sizeof(req) - 1 - n);
                        if (k <= 0)
                                break;
                        n += (size_t)k;
                        req[n] = '\0';
                        if (strstr(req, "\r\n\r\n"))
                                break;
                }
                req[n] = '\0';
                memcpy(s->last_request, req, n + 1);
                size_t i = atomic_fetch_add(&s->served, 1);
                const struct reply *r = &s->script[i < s->n_script ? i : s->n_script - 1];
                char head[512];
                snprintf(head, sizeof(head), "%s\r\nConnection: close\r\n\r\n", r->head);
                (void)!write(c, head, strlen(head));
                if (!r->body) {
                        while (!atomic_load(&s->stop)) {
                                struct timespec ts = { 0, 10000000 };
                                nanosleep(&ts, NULL);
                        }
                } else {
                        size_t len = strlen(r->body), piece = r->piece ? r->piece : len;
                        for (size_t off = 0; off < len; off += piece) {
                                size_t k = len - off < piece ? len - off : piece;
                                (void)!write(c, r->body + off, k);
                                struct timespec ts = { 0, 2000000 };
                                nanosleep(&ts, NULL);
                        }
                }
                close(c);
        }
        return NULL;
}

static struct server *start(const struct reply *script, size_t n)
{
        struct server *s = calloc(1, sizeof(*s));
        s->script = script;
        s->n_script = n;
        s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
        socklen_t l = sizeof(a);
        getsockname(s->fd, (struct sockaddr *)&a, &l);
        s->port = ntohs(a.sin_port);
        listen(s->fd, 16);
        struct timeval tv = { 0, 100000 };
        setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        pthread_create(&s->thread, NULL, serve, s);
        return s;
}

static void stop(struct server *s)
{
        atomic_store(&s->stop, true);
        pthread_join(s->thread, NULL);
        close(s->fd);
        free(s);
}

static struct se_kube_client *client_as(const struct server *s, size_t max_body, const char *user)
{
        char text[1024];
        snprintf(text, sizeof(text),
                 "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
                 "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
                 "users: [{name: u, user: %s}]\n",
                 s->port, user);
        const char *names[] = { "/t/kc" }, *texts[] = { text };
        size_t len = strlen(text);
        struct se_kube_config *cfg;
        struct se_diag d;
        assert_int_equal(se_kube_config_parse(names, texts, &len, 1, NULL, &cfg, &d), 0);
        struct se_kube_client_opts o = { .qps = -1, .max_body = max_body, .timeout_ms = 10000 };
        struct se_kube_client *c;
        assert_int_equal(se_kube_client_new(cfg, &o, &c, &d), 0);
        se_kube_config_free(cfg);
        return c;
}

static struct se_kube_client *client(const struct server *s, size_t max_body)
{
        return client_as(s, max_body, "{token: sekret}");
}

static const char ok_json[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json";

static void test_http__retry_after_429(void **state)
{
        (void)state;
        static const struct reply script[] = {
                { "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Type: application/json",
                  "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}", 0 },
                { ok_json, "{\"kind\":\"Namespace\"}", 0 },
        };
        struct server *s = start(script, 2);
        struct se_kube_client *c = client(s, 0);
        struct se_diag d;
        struct se_strbuf body;
        se_strbuf_init(&body, 0);
        uint64_t t0 = se_now_mono_ns();
        assert_int_equal(se_kube_request(c, "POST", "/api/v1/namespaces", NULL, "{}", 2, NULL,
                                         &body, NULL, &d),
                         0);
        assert_true(se_now_mono_ns() - t0 >= 900000000ull); /* waited Retry-After */
        assert_int_equal(atomic_load(&s->served), 2);
        assert_string_equal(body.buf, "{\"kind\":\"Namespace\"}");
        /* what every request carries */
        assert_non_null(strstr(s->last_request, "POST /api/v1/namespaces HTTP/1.1\r\n"));
        assert_non_null(strstr(s->last_request, "User-Agent: svcenv/"));
        assert_non_null(strstr(s->last_request, "Authorization: Bearer sekret\r\n"));
        assert_non_null(strstr(s->last_request, "Content-Type: application/json\r\n"));
        se_strbuf_release(&body);
        se_kube_client_free(c);
        stop(s);
}

/* A token file is trimmed of surrounding white space, as client-go does; a
 * CR or LF (any control character) inside is refused before anything is
 * sent, not written into the request as a header of its own. */
static void test_http__token_file_with_line_break_refused(void **state)
{
        (void)state;
        static const struct reply script[] = { { ok_json, "{}", 0 } };
        struct server *s = start(script, 1);
        char path[] = "/tmp/svcenv-token-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        const char good[] = " good\n";
        assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
        char user[128];
        snprintf(user, sizeof(user), "{tokenFile: '%s'}", path);
        struct se_kube_client *c = client_as(s, 0, user);
        struct se_diag d;
        assert_int_equal(se_kube_request(c, "GET", "/x", NULL, NULL, 0, NULL, NULL, NULL, &d), 0);
        assert_non_null(strstr(s->last_request, "Authorization: Bearer good\r\n"));
        se_kube_client_free(c);

        const char bad[] = "abc\r\nX-Injected: 1\n";
        assert_int_equal(pwrite(fd, bad, strlen(bad), 0), (ssize_t)strlen(bad));
        close(fd);
        c = client_as(s, 0, user);
        assert_int_equal(se_kube_request(c, "GET", "/x", NULL, NULL, 0, NULL, NULL, NULL, &d),
                         -EPERM);
        if (!strstr(d.text, "tokenFile") || !strstr(d.text, "control character"))
                fail_msg("got \"%s\"", d.text);
        assert_int_equal(atomic_load(&s->served), 1);
        assert_null(strstr(s->last_request, "X-Injected"));
        se_kube_client_free(c);
        unlink(path);
        stop(s);
}

static void test_http__5xx_retried_only_for_get(void **state)
{
        (void)state;
        static const struct reply script[] = {
                { "HTTP/1.1 500 Internal Server Error", "oops", 0 },
                { "HTTP/1.1 502 Bad Gateway", "", 0 },
                { ok_json, "{}", 0 },
        };
        struct server *s = start(script, 3);
        struct se_kube_client *c = client(s, 0);
        struct se_diag d;
        assert_int_equal(se_kube_request(c, "GET", "/x", NULL, NULL, 0, NULL, NULL, NULL, &d), 0);
        assert_int_equal(atomic_load(&s->served), 3);
        stop(s);
        s = start(script, 3);
        se_kube_client_free(c);
        c = client(s, 0);
        long code;
        assert_int_equal(se_kube_request(c, "POST", "/x", NULL, "{}", 2, NULL, NULL, &code, &d),
                         -EIO);
        assert_int_equal(code, 500);
        assert_int_equal(atomic_load(&s->served), 1);
        assert_string_equal(d.text, "POST /x: HTTP 500: oops");
        se_kube_client_free(c);
        stop(s);
}

/* se_kube_client_reachable follows the last finished request: any answer
 * below 500 reached the server, a 5xx or no connection did not */
static void test_http__reachable(void **state)
{
        (void)state;
        static const struct reply script[] = {
                { "HTTP/1.1 404 Not Found", "no", 0 },
                { "HTTP/1.1 500 Internal Server Error", "etcd", 0 },
                { "HTTP/1.1 409 Conflict", "again", 0 },
        };
        struct server *s = start(script, 3);
        struct se_kube_client *c = client(s, 0);
        struct se_diag d;
        assert_false(se_kube_client_reachable(c)); /* nothing asked yet */
        assert_int_equal(se_kube_request(c, "POST", "/x", NULL, "{}", 2, NULL, NULL, NULL, &d),
                         -ENOENT);
        assert_true(se_kube_client_reachable(c));
        assert_true(se_kube_request(c, "POST", "/x", NULL, "{}", 2, NULL, NULL, NULL, &d) < 0);
        assert_false(se_kube_client_reachable(c));
        assert_true(se_kube_request(c, "POST", "/x", NULL, "{}", 2, NULL, NULL, NULL, &d) < 0);
        assert_true(se_kube_client_reachable(c));
        stop(s); /* nobody listens on the port any more */
        assert_true(se_kube_request(c, "POST", "/x", NULL, "{}", 2, NULL, NULL, NULL, &d) < 0);
        assert_false(se_kube_client_reachable(c));
        se_kube_client_free(c);
}

static void test_http__body_cap(void **state)
{
        (void)state;
        static char big[5001];
        memset(big, 'x', 5000);
        static const struct reply script[] = { { ok_json, big, 0 } };
        struct server *s = start(script, 1);
        struct se_kube_client *c = client(s, 1000);
        struct se_diag d;
        struct se_strbuf body;
        se_strbuf_init(&body, 0);
        assert_int_equal(se_kube_request(c, "GET", "/big", NULL, NULL, 0, NULL, &body, NULL, &d),
                         -EFBIG);
        assert_non_null(strstr(d.text, "larger than 1000 bytes"));
        se_strbuf_release(&body);
        se_kube_client_free(c);
        stop(s);
}

struct canceller {
        struct se_kube_client *c;
        atomic_bool *flag;
};

static void *cancel_later(void *arg)
{
        struct canceller *k = arg;
        struct timespec ts = { 0, 200000000 };
        nanosleep(&ts, NULL);
        if (k->flag)
                atomic_store(k->flag, true);
        else
                se_kube_client_cancel(k->c);
        return NULL;
}

static void test_http__cancel_from_another_thread(void **state)
{
        (void)state;
        static const struct reply script[] = { { ok_json, NULL, 0 } }; /* hangs */
        struct server *s = start(script, 1);
        struct se_kube_client *c = client(s, 0);
        struct se_diag d;
        atomic_bool flag = false;
        struct canceller k = { c, &flag };
        pthread_t t;
        pthread_create(&t, NULL, cancel_later, &k);
        uint64_t t0 = se_now_mono_ns();
        assert_int_equal(se_kube_request(c, "GET", "/hang", NULL, NULL, 0, &flag, NULL, NULL, &d),
                         -ECANCELED);
        assert_true(se_now_mono_ns() - t0 < 3000000000ull);
        pthread_join(t, NULL);
        /* the client-wide cancel too */
        k.flag = NULL;
        pthread_create(&t, NULL, cancel_later, &k);
        assert_int_equal(se_kube_request(c, "GET", "/hang", NULL, NULL, 0, NULL, NULL, NULL, &d),
                         -ECANCELED);
        pthread_join(t, NULL);
        se_kube_client_free(c);
        stop(s);
}

struct seen {
        int added, modified, deleted, bookmarks;
};

static int on_event(void *data, enum se_kube_event_type t, const json_t *obj)
{
        (void)obj;
        struct seen *s = data;
        if (t == SE_KUBE_ADDED)
                s->added++;
        else if (t == SE_KUBE_MODIFIED)
                s->modified++;
        else if (t == SE_KUBE_DELETED)
                s->deleted++;
        else
                s->bookmarks++;
        return 0;
}

static void test_http__watch_stream(void **state)
{
        (void)state;
        static const char events[] =
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}\n"
                "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"12\"}}}\n"
                "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"15\"}}}\n"
                "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"16\"}}}\n";
        static const char gone[] =
                "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                "\"reason\":\"Expired\",\"message\":\"too old resource version: 16 (20)\"}}\n";
        static char both[sizeof(events) + sizeof(gone)];
        snprintf(both, sizeof(both), "%s%s", events, gone);
        static const struct reply script[] = {
                { ok_json, events, 7 }, /* chunks that cut events anywhere */
                { ok_json, both, 13 },
                { "HTTP/1.1 410 Gone\r\nContent-Type: application/json",
                  "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410,\"message\":\"too old\"}",
                  0 },
        };
        struct server *s = start(script, 3);
        struct se_kube_client *c = client(s, 0);
        struct se_diag d;
        struct seen seen = { 0 };
        char rv[SE_KUBE_RV_MAX] = "10";
        struct se_kube_watch_opts wo = { .timeout_s = 42 };
        const struct se_kube_resource *pods = se_kube_resource_of(SE_KIND_POD);
        /* the server ends the stream: 0, every event, rv of the last one */
        assert_int_equal(se_kube_watch(c, pods, "ns", &wo, rv, on_event, &seen, NULL, &d), 0);
        assert_int_equal(seen.added, 1);
        assert_int_equal(seen.modified, 1);
        assert_int_equal(seen.bookmarks, 1);
        assert_int_equal(seen.deleted, 1);
        assert_string_equal(rv, "16");
        assert_non_null(strstr(s->last_request,
                               "GET /api/v1/namespaces/ns/pods?watch=1&allowWatchBookmarks=true&"
                               "timeoutSeconds=42&resourceVersion=10 HTTP/1.1"));
        /* an ERROR event with 410: -ESTALE after the events before it */
        assert_int_equal(se_kube_watch(c, pods, "ns", &wo, rv, on_event, &seen, NULL, &d), -ESTALE);
        assert_int_equal(seen.deleted, 2);
        assert_non_null(strstr(d.text, "too old resource version"));
        /* HTTP 410 on the watch request itself */
        assert_int_equal(se_kube_watch(c, pods, "ns", &wo, rv, on_event, &seen, NULL, &d), -ESTALE);
        se_kube_client_free(c);
        stop(s);
}

/* Events: the first is created, an identical repeat patched (count 2), and
 * of 30 more about the same object only what the spam bucket (25) has left
 * is written. */
static void test_http__event_recorder(void **state)
{
        (void)state;
        static const struct reply script[] = {
                { "HTTP/1.1 201 Created\r\nContent-Type: application/json",
                  "{\"metadata\":{\"name\":\"web.1\"}}", 0 },
        };
        struct server *s = start(script, 1);
        struct se_kube_client *c = client(s, 0);
        struct se_kube_recorder *r = se_kube_recorder_new(c, "endpoint-controller");
        assert_non_null(r);
        struct se_kube_objref ref = { "Service", "v1", "ns", "web", "u-1", "5" };
        assert_int_equal(
                se_kube_recorder_eventf(r, &ref, SE_KUBE_EVENT_WARNING, "Failed", "try %d", 1), 0);
        assert_true(se_kube_recorder_flush(r, 5000));
        assert_non_null(strstr(s->last_request, "POST /api/v1/namespaces/ns/events HTTP/1.1"));
        assert_int_equal(
                se_kube_recorder_eventf(r, &ref, SE_KUBE_EVENT_WARNING, "Failed", "try %d", 1), 0);
        assert_true(se_kube_recorder_flush(r, 5000));
        assert_non_null(strstr(s->last_request, "PATCH /api/v1/namespaces/ns/events/web.1 "));
        assert_non_null(strstr(s->last_request, "merge-patch+json"));
        for (int i = 0; i < 30; i++)
                assert_int_equal(se_kube_recorder_eventf(r, &ref, SE_KUBE_EVENT_WARNING, "Failed",
                                                         "other %d", i),
                                 0);
        assert_true(se_kube_recorder_flush(r, 10000));
        struct se_kube_recorder_stats st;
        se_kube_recorder_stats(r, &st);
        assert_int_equal(st.created, 24);
        assert_int_equal(st.patched, 1);
        assert_int_equal(st.dropped, 7);
        assert_int_equal(atomic_load(&s->served), 25);
        /* another object has a bucket of its own */
        ref.name = "db";
        assert_int_equal(se_kube_recorder_eventf(r, &ref, SE_KUBE_EVENT_NORMAL, "Ok", "fine"), 0);
        assert_true(se_kube_recorder_flush(r, 5000));
        se_kube_recorder_stats(r, &st);
        assert_int_equal(st.created, 25);
        se_kube_recorder_free(r);
        se_kube_client_free(c);
        stop(s);
}

/* A repeat whose Event is gone (expired, deleted): the PATCH answers 404 and
 * the event is created anew. */
static void test_http__event_recreated_when_gone(void **state)
{
        (void)state;
        static const struct reply script[] = {
                { "HTTP/1.1 201 Created\r\nContent-Type: application/json",
                  "{\"metadata\":{\"name\":\"web.1\"}}", 0 },
                { "HTTP/1.1 404 Not Found\r\nContent-Type: application/json",
                  "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}", 0 },
                { "HTTP/1.1 201 Created\r\nContent-Type: application/json",
                  "{\"metadata\":{\"name\":\"web.2\"}}", 0 },
        };
        struct server *s = start(script, 3);
        struct se_kube_client *c = client(s, 0);
        struct se_kube_recorder *r = se_kube_recorder_new(c, "endpoint-controller");
        struct se_kube_objref ref = { "Service", "v1", "ns", "web", "u-1", "5" };
        for (int i = 0; i < 2; i++) {
                assert_int_equal(
                        se_kube_recorder_eventf(r, &ref, SE_KUBE_EVENT_WARNING, "Failed", "same"),
                        0);
                assert_true(se_kube_recorder_flush(r, 5000));
        }
        assert_non_null(strstr(s->last_request, "POST /api/v1/namespaces/ns/events HTTP/1.1"));
        struct se_kube_recorder_stats st;
        se_kube_recorder_stats(r, &st);
        assert_int_equal(st.created, 2);
        assert_int_equal(st.patched, 0);
        assert_int_equal(st.dropped, 0);
        assert_int_equal(atomic_load(&s->served), 3);
        se_kube_recorder_free(r);
        se_kube_client_free(c);
        stop(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_http__retry_after_429),
                cmocka_unit_test(test_http__token_file_with_line_break_refused),
                cmocka_unit_test(test_http__5xx_retried_only_for_get),
                cmocka_unit_test(test_http__reachable),
                cmocka_unit_test(test_http__body_cap),
                cmocka_unit_test(test_http__cancel_from_another_thread),
                cmocka_unit_test(test_http__watch_stream),
                cmocka_unit_test(test_http__event_recorder),
                cmocka_unit_test(test_http__event_recreated_when_gone),
        };
        return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
