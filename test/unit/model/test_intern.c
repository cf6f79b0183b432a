/* SE_DECODE_INTERN: the same decoded values, one shared copy of recurring
 * strings across objects and threads, and a pool that stops at its caps. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>
#include <svcenv/model.h>

#include "../../../pkg/model/decode_internal.h"

static json_t *pod_json(const char *ns, const char *name, const char *app, const char *node)
{
        json_t *j = json_pack(
                "{s:s,s:s,s:{s:s,s:s,s:s,s:{s:s,s:s}},s:{s:s,s:[{s:s,s:s,s:[{s:s,s:i}]}]},"
                "s:{s:s,s:s}}",
                "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", ns, "uid",
                "u-1", "labels", "app", app, "tier-label", "backend-tier", "spec", "nodeName", node,
                "containers", "name", "web-server", "image", "img", "ports", "name", "http-alt",
                "containerPort", 8080, "status", "phase", "Running", "podIP", "10.0.0.1");
        assert_non_null(j);
        return j;
}

static struct se_object *decode(json_t *j, enum se_kind kind, unsigned flags)
{
        struct se_object *o = NULL;
        struct se_decode_error e;
        int r = se_decode_object_flags(j, kind, NULL, flags, &o, &e);
        if (r != 0)
                fail_msg("%s: %s", e.path, e.message);
        return o;
}

static struct se_pod *decode_pod_json(const char *ns, const char *name, const char *app,
                                      const char *node, unsigned flags)
{
        json_t *j = pod_json(ns, name, app, node);
        struct se_object *o = decode(j, SE_KIND_POD, flags);
        json_decref(j);
        return (struct se_pod *)o;
}

static char *encoded(const struct se_object *o)
{
        json_t *j = se_encode_object(o);
        assert_non_null(j);
        char *s = json_dumps(j, JSON_SORT_KEYS);
        json_decref(j);
        assert_non_null(s);
        return s;
}

/* Full objects encode to the same JSON with and without the pool. */
static void test_intern__same_values(void **state)
{
        (void)state;
        json_t *svc = json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:{s:s},s:[{s:s,s:i}]}}",
                                "apiVersion", "v1", "kind", "Service", "metadata", "name", "web",
                                "namespace", "same-ns", "labels", "team", "blue", "spec",
                                "selector", "app", "same-app", "ports", "name", "http", "port", 80);
        json_t *pod = pod_json("same-ns", "p-1", "same-app", "same-node");
        assert_non_null(svc);
        for (int round = 0; round < 3; round++) { /* the pool fills on the way */
                struct se_object *a = decode(svc, SE_KIND_SERVICE, 0);
                struct se_object *b = decode(svc, SE_KIND_SERVICE, SE_DECODE_INTERN);
                struct se_object *c = decode(pod, SE_KIND_POD, 0);
                struct se_object *d = decode(pod, SE_KIND_POD, SE_DECODE_INTERN);
                char *ea = encoded(a), *eb = encoded(b), *ec = encoded(c), *ed = encoded(d);
                assert_string_equal(ea, eb);
                assert_string_equal(ec, ed);
                assert_non_null(strstr(ed, "\"nodeName\": \"same-node\""));
                free(ea);
                free(eb);
                free(ec);
                free(ed);
                se_object_unref(a);
                se_object_unref(b);
                se_object_unref(c);
                se_object_unref(d);
        }
        json_decref(svc);
        json_decref(pod);
}

static bool in_arena(const struct se_object *o, const char *p)
{
        /* exact-size objects are one chunk: [o, o + memory) */
        return (const char *)p >= (const char *)o &&
               (const char *)p < (const char *)o + se_object_memory(o);
}

/* From the second object on, the recurring strings are one copy outside the
 * objects; without the flag each object has its own. */
static void test_intern__shared_across_objects(void **state)
{
        (void)state;
        unsigned f = SE_DECODE_INTERN | SE_DECODE_SLIM_POD;
        struct se_pod *first = decode_pod_json("share-ns", "a", "share-app", "share-node", f);
        struct se_pod *p1 = decode_pod_json("share-ns", "b", "share-app", "share-node", f);
        struct se_pod *p2 = decode_pod_json("share-ns", "c", "share-app", "share-node", f);
        struct se_pod *own =
                decode_pod_json("share-ns", "d", "share-app", "share-node", SE_DECODE_SLIM_POD);
        /* the first sighting is copied (a string seen once is not pooled) */
        assert_true(in_arena(&first->obj, first->obj.meta.namespace));
        const char *v1 = se_kvlist_get(&p1->obj.meta.labels, "app");
        const char *v2 = se_kvlist_get(&p2->obj.meta.labels, "app");
        assert_string_equal(v1, "share-app");
        assert_ptr_equal(v1, v2);
        assert_false(in_arena(&p1->obj, v1));
        assert_ptr_equal(p1->obj.meta.namespace, p2->obj.meta.namespace);
        assert_false(in_arena(&p1->obj, p1->obj.meta.namespace));
        assert_ptr_equal(p1->node_name, p2->node_name);
        assert_string_equal(p2->node_name, "share-node");
        assert_ptr_equal(p1->obj.meta.labels.items[1].key, p2->obj.meta.labels.items[1].key);
        assert_string_equal(p2->obj.meta.labels.items[1].key, "tier-label");
        assert_ptr_equal(p1->containers[0].name, p2->containers[0].name);
        assert_ptr_equal(p1->containers[0].ports[0].name, p2->containers[0].ports[0].name);
        assert_string_equal(p2->containers[0].ports[0].name, "http-alt");
        /* unique values stay in their object */
        assert_true(in_arena(&p2->obj, p2->obj.meta.name));
        assert_true(in_arena(&p2->obj, p2->obj.meta.uid));
        assert_true(in_arena(&p2->obj, p2->pod_ip));
        /* no flag: own copies */
        assert_true(in_arena(&own->obj, own->obj.meta.namespace));
        assert_true(in_arena(&own->obj, own->node_name));
        /* the pool is not the object's: its memory is smaller */
        assert_true(se_object_memory(&p2->obj) < se_object_memory(&own->obj));
        /* a Service's selector points at the pods' label values */
        json_t *svc = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:{s:s}}}", "apiVersion", "v1", "kind",
                                "Service", "metadata", "name", "web", "namespace", "share-ns",
                                "spec", "selector", "app", "share-app");
        struct se_service *s = (struct se_service *)decode(svc, SE_KIND_SERVICE, f);
        assert_ptr_equal(se_kvlist_get(&s->selector, "app"), v1);
        assert_ptr_equal(s->obj.meta.namespace, p1->obj.meta.namespace);
        json_decref(svc);
        se_object_unref(&s->obj);
        se_object_unref(&first->obj);
        se_object_unref(&p1->obj);
        se_object_unref(&p2->obj);
        se_object_unref(&own->obj);
}

static void test_intern__long_and_unique_strings_stay_out(void **state)
{
        (void)state;
        char long_ns[70];
        memset(long_ns, 'n', 65);
        long_ns[65] = '\0';
        size_t n0, b0, n1, b1;
        model_intern_pool_stats(&n0, &b0);
        /* a value over 64 bytes, offered many times */
        for (int i = 0; i < 3; i++) {
                struct se_pod *p = decode_pod_json("x", "p", "uniq-0", long_ns,
                                                   SE_DECODE_INTERN | SE_DECODE_SLIM_POD);
                assert_true(in_arena(&p->obj, p->node_name));
                assert_string_equal(p->node_name, long_ns);
                se_object_unref(&p->obj);
        }
        model_intern_pool_stats(&n1, &b1);
        /* "x" (ns), "uniq-0" and the shared literals of pod_json at most */
        assert_true(n1 - n0 <= 6);
        assert_null(model_intern_pool_find(long_ns, strlen(long_ns)));
        /* values seen once each are never pooled */
        for (int i = 1; i <= 200; i++) {
                char app[32];
                snprintf(app, sizeof(app), "uniq-%d", i);
                struct se_pod *p =
                        decode_pod_json("x", "p", app, "n", SE_DECODE_INTERN | SE_DECODE_SLIM_POD);
                assert_true(in_arena(&p->obj, se_kvlist_get(&p->obj.meta.labels, "app")));
                se_object_unref(&p->obj);
        }
        size_t n2, b2;
        model_intern_pool_stats(&n2, &b2);
        assert_true(n2 - n1 <= 1); /* "n" */
}

/* Threads decoding the same vocabulary: same values, one copy each. */
#define THREADS    4
#define PER_THREAD 150

static void *decode_many(void *arg)
{
        const char **seen = arg;
        for (int i = 0; i < PER_THREAD; i++) {
                char app[32], ns[32], name[32];
                snprintf(app, sizeof(app), "thr-app-%d", i % 7);
                snprintf(ns, sizeof(ns), "thr-ns-%d", i % 3);
                snprintf(name, sizeof(name), "pod-%d", i);
                struct se_pod *p = decode_pod_json(ns, name, app, "thr-node",
                                                   SE_DECODE_INTERN | SE_DECODE_SLIM_POD);
                assert_string_equal(se_kvlist_get(&p->obj.meta.labels, "app"), app);
                assert_string_equal(p->obj.meta.namespace, ns);
                assert_string_equal(p->node_name, "thr-node");
                if (i == PER_THREAD - 1)
                        *seen = p->node_name;
                se_object_unref(&p->obj);
        }
        return NULL;
}

static void test_intern__threads(void **state)
{
        (void)state;
        pthread_t t[THREADS];
        const char *node[THREADS];
        for (int i = 0; i < THREADS; i++)
                assert_int_equal(pthread_create(&t[i], NULL, decode_many, &node[i]), 0);
        for (int i = 0; i < THREADS; i++)
                assert_int_equal(pthread_join(t[i], NULL), 0);
        const char *pooled = model_intern_pool_find("thr-node", 8);
        assert_non_null(pooled);
        for (int i = 0; i < THREADS; i++)
                assert_ptr_equal(node[i], pooled);
        for (int i = 0; i < 7; i++) {
                char app[32];
                snprintf(app, sizeof(app), "thr-app-%d", i);
                assert_non_null(model_intern_pool_find(app, strlen(app)));
        }
}

/* Fills the pool with `len`-byte strings; returns how many went in. */
static size_t fill(size_t len)
{
        char s[80];
        size_t added = 0;
        for (unsigned i = 0; i < 200000; i++) {
                snprintf(s, sizeof(s), "%0*u", (int)len, i);
                model_intern_pool_add(s, len);
                if (model_intern_pool_add(s, len)) /* the second offer pools it */
                        added++;
        }
        return added;
}

/* In a child: the pool is process-wide and stays full. */
static void check_full_pool(size_t len, bool by_bytes)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct se_pod *before = decode_pod_json("full-ns", "a", "full-app", "full-node",
                                                        SE_DECODE_INTERN | SE_DECODE_SLIM_POD);
                se_object_unref(&before->obj);
                before = decode_pod_json("full-ns", "b", "full-app", "full-node",
                                         SE_DECODE_INTERN | SE_DECODE_SLIM_POD);
                fill(len);
                if (by_bytes)
                        fill(8); /* short strings fit in what long ones left */
                size_t n, bytes;
                model_intern_pool_stats(&n, &bytes);
                int bad = 0;
                bad |= by_bytes ? !(bytes <= INTERN_MAX_BYTES && bytes + 10 > INTERN_MAX_BYTES &&
                                    n < INTERN_MAX_STRINGS) :
                                  n != INTERN_MAX_STRINGS;
                bad |= (n > INTERN_MAX_STRINGS || bytes > INTERN_MAX_BYTES) << 1;
                /* full: new strings are copied into each object, old ones
                 * are still shared, and the values are right */
                for (int i = 0; i < 2; i++) {
                        struct se_pod *p = decode_pod_json("new-ns", "c", "full-app", "new-node",
                                                           SE_DECODE_INTERN | SE_DECODE_SLIM_POD);
                        bad |= (strcmp(p->obj.meta.namespace, "new-ns") != 0 ||
                                strcmp(p->node_name, "new-node") != 0 ||
                                !in_arena(&p->obj, p->node_name))
                               << 2;
                        bad |= (se_kvlist_get(&p->obj.meta.labels, "app") !=
                                se_kvlist_get(&before->obj.meta.labels, "app"))
                               << 3;
                        se_object_unref(&p->obj);
                }
                bad |= (model_intern_pool_find("new-node", 8) != NULL) << 4;
                se_object_unref(&before->obj);
                _exit(bad);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_intern__count_cap(void **state)
{
        (void)state;
        check_full_pool(8, false); /* 65,536 strings of 10 bytes: 640 KiB */
}

static void test_intern__byte_cap(void **state)
{
        (void)state;
        check_full_pool(64, true); /* 4 MiB / 66 bytes: ~63,550 strings */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_intern__same_values),
                cmocka_unit_test(test_intern__shared_across_objects),
                cmocka_unit_test(test_intern__long_and_unique_strings_stay_out),
                cmocka_unit_test(test_intern__threads),
                cmocka_unit_test(test_intern__count_cap),
                cmocka_unit_test(test_intern__byte_cap),
        };
        return cmocka_run_group_tests_name("intern", tests, NULL, NULL);
}
