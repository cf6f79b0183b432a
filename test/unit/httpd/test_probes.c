/* /healthz, /livez, /readyz and /metrics as every daemon serves them:
 * Kubernetes' healthz format, the checks each path runs, 404 as Go's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/httpd_probes.h>

static bool flag(void *data)
{
        return *(bool *)data;
}

static void write_metrics(void *data, struct se_strbuf *out)
{
        (void)data;
        se_strbuf_puts(out, "# TYPE x counter\nx 1\n");
}

struct answer {
        bool served;
        int status;
        char body[512];
        const char *type;
        bool nosniff;
};

static struct answer ask(const struct se_httpd_probes *p, const char *method, const char *path,
                         const char *query)
{
        struct se_httpd_request req = {
                .method = method, .path = path, .query = query, .content_type = "", .body = ""
        };
        struct se_httpd_response resp = { .status = 200 };
        struct answer a = { 0 };
        a.served = se_httpd_probes_serve(p, &req, &resp);
        a.status = resp.status;
        a.type = resp.content_type;
        a.nosniff = resp.nosniff;
        if (resp.body) {
                assert_true(resp.len < sizeof(a.body));
                memcpy(a.body, resp.body, resp.len);
                free(resp.body);
        }
        return a;
}

static void test_probes__health_paths(void **state)
{
        (void)state;
        bool live = true, synced = false;
        const struct se_httpd_check checks[] = {
                { .name = "loop", .ok = flag, .data = &live },
                { .name = "informer-sync", .ok = flag, .data = &synced, .ready_only = true },
        };
        const struct se_httpd_probes p = { .checks = checks, .n_checks = 2 };
        struct answer a = ask(&p, "GET", "/livez", "");
        assert_true(a.served);
        assert_int_equal(a.status, 200);
        assert_string_equal(a.body, "ok");
        assert_string_equal(a.type, "text/plain; charset=utf-8");
        assert_true(a.nosniff);
        /* a ready-only check fails /readyz and /healthz, not /livez */
        a = ask(&p, "GET", "/readyz", "");
        assert_int_equal(a.status, 500);
        assert_string_equal(a.body, "[+]ping ok\n[+]loop ok\n"
                                    "[-]informer-sync failed: reason withheld\n"
                                    "readyz check failed\n");
        a = ask(&p, "HEAD", "/healthz", "");
        assert_int_equal(a.status, 500);
        assert_non_null(strstr(a.body, "healthz check failed\n"));
        synced = true;
        a = ask(&p, "GET", "/readyz", "x=1&verbose");
        assert_int_equal(a.status, 200);
        assert_string_equal(a.body, "[+]ping ok\n[+]loop ok\n[+]informer-sync ok\n"
                                    "readyz check passed\n");
        a = ask(&p, "GET", "/readyz", "verbosely=1");
        assert_string_equal(a.body, "ok");
        live = false;
        a = ask(&p, "POST", "/livez", "verbose=true");
        assert_int_equal(a.status, 500);
        assert_string_equal(a.body,
                            "[+]ping ok\n[-]loop failed: reason withheld\nlivez check failed\n");
}

static void test_probes__metrics_and_others(void **state)
{
        (void)state;
        const struct se_httpd_probes none = { 0 };
        struct answer a = ask(&none, "GET", "/metrics", "");
        assert_false(a.served); /* no writer: not ours */
        const struct se_httpd_probes p = { .metrics = write_metrics };
        a = ask(&p, "GET", "/metrics", "");
        assert_true(a.served);
        assert_int_equal(a.status, 200);
        assert_string_equal(a.type, SE_HTTPD_METRICS_TYPE);
        assert_string_equal(a.body, "# TYPE x counter\nx 1\n");
        a = ask(&p, "GET", "/livez/", "");
        assert_false(a.served);
        a = ask(&p, "POST", "/mutate", "");
        assert_false(a.served);
        struct se_httpd_response resp = { 0 };
        se_httpd_not_found(&resp);
        assert_int_equal(resp.status, 404);
        assert_true(resp.len == strlen("404 page not found\n"));
        assert_memory_equal(resp.body, "404 page not found\n", resp.len);
        assert_true(resp.nosniff);
        free(resp.body);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_probes__health_paths),
                cmocka_unit_test(test_probes__metrics_and_others),
        };
        return cmocka_run_group_tests_name("probes", tests, NULL, NULL);
}
