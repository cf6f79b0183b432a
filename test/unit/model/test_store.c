/* The object store: keys, replace, delete, listing order, selectors, callbacks. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/model.h>
#include <svcenv/store.h>

static struct se_object *make(enum se_kind kind, const char *ns, const char *name, const char *app)
{
        struct se_object *o = se_object_new(kind);
        assert_non_null(o);
        o->meta.namespace = se_arena_strdup(&o->arena, ns);
        o->meta.name = se_arena_strdup(&o->arena, name);
        if (app) {
                struct se_kv *kv = se_arena_alloc(&o->arena, sizeof(*kv));
                kv->key = "app";
                kv->value = se_arena_strdup(&o->arena, app);
                o->meta.labels.items = kv;
                o->meta.labels.n = 1;
        }
        return o;
}

struct events {
        int adds, updates, deletes;
        char last_old[16], last_new[16]; /* copies: the old object dies after the call */
};

static void on_change(void *data, enum se_store_event ev, const struct se_object *old,
                      const struct se_object *new_obj)
{
        struct events *e = data;
        if (ev == SE_STORE_ADD) {
                assert_null(old);
                e->adds++;
        } else if (ev == SE_STORE_UPDATE) {
                assert_non_null(old);
                assert_non_null(new_obj);
                e->updates++;
        } else {
                assert_null(new_obj);
                e->deletes++;
        }
        const char *o = old ? se_kvlist_get(&old->meta.labels, "app") : NULL;
        const char *n = new_obj ? se_kvlist_get(&new_obj->meta.labels, "app") : NULL;
        snprintf(e->last_old, sizeof(e->last_old), "%s", o ? o : "");
        snprintf(e->last_new, sizeof(e->last_new), "%s", n ? n : "");
}

static void test_store__put_replace_delete_with_callbacks(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        struct events ev = { 0 };
        assert_int_equal(se_store_subscribe(s, SE_KIND_POD, on_change, &ev), 0);
        assert_int_equal(se_store_put(s, make(SE_KIND_POD, "a", "p1", "v1")), 0);
        assert_int_equal(se_store_put(s, make(SE_KIND_POD, "a", "p1", "v2")), 0);
        assert_int_equal(ev.adds, 1);
        assert_int_equal(ev.updates, 1);
        assert_string_equal(ev.last_old, "v1");
        assert_string_equal(ev.last_new, "v2");
        assert_int_equal(se_store_count(s, SE_KIND_POD, NULL), 1);
        assert_int_equal(se_store_add(s, make(SE_KIND_POD, "a", "p1", "v3")), -EEXIST);
        /* a service of the same name is another key, and no pod callback runs */
        assert_int_equal(se_store_put(s, make(SE_KIND_SERVICE, "a", "p1", NULL)), 0);
        assert_int_equal(ev.adds, 1);
        assert_int_equal(se_store_delete(s, SE_KIND_POD, "a", "p1"), 0);
        assert_int_equal(ev.deletes, 1);
        assert_string_equal(ev.last_old, "v2");
        assert_int_equal(se_store_delete(s, SE_KIND_POD, "a", "p1"), -ENOENT);
        assert_null(se_store_get(s, SE_KIND_POD, "a", "p1"));
        assert_non_null(se_store_get(s, SE_KIND_SERVICE, "a", "p1"));
        /* unsubscribed: no more callbacks */
        assert_int_equal(se_store_unsubscribe(s, SE_KIND_POD, on_change, &ev), 0);
        assert_int_equal(se_store_unsubscribe(s, SE_KIND_POD, on_change, &ev), -ENOENT);
        assert_int_equal(se_store_put(s, make(SE_KIND_POD, "a", "p2", "v1")), 0);
        assert_int_equal(ev.adds, 1);
        se_store_free(s);
}

static void test_store__list_sorted_and_by_namespace(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        const char *names[][2] = { { "b", "z" }, { "a", "y" }, { "b", "a" }, { "a", "x" } };
        for (size_t i = 0; i < 4; i++)
                assert_int_equal(
                        se_store_put(s, make(SE_KIND_SERVICE, names[i][0], names[i][1], NULL)), 0);
        const struct se_object **objs;
        long n = se_store_list(s, SE_KIND_SERVICE, NULL, &objs);
        assert_int_equal(n, 4);
        assert_string_equal(objs[0]->meta.name, "x");
        assert_string_equal(objs[1]->meta.name, "y");
        assert_string_equal(objs[2]->meta.namespace, "b");
        assert_string_equal(objs[2]->meta.name, "a");
        free(objs);
        n = se_store_list(s, SE_KIND_SERVICE, "b", &objs);
        assert_int_equal(n, 2);
        assert_string_equal(objs[1]->meta.name, "z");
        free(objs);
        assert_int_equal(se_store_list(s, SE_KIND_SERVICE, "none", &objs), 0);
        assert_null(objs);
        /* unordered: the same objects, each once */
        n = se_store_list_unordered(s, SE_KIND_SERVICE, NULL, &objs);
        assert_int_equal(n, 4);
        for (size_t i = 0; i < 4; i++) {
                int seen = 0;
                for (long k = 0; k < n; k++)
                        seen += strcmp(objs[k]->meta.namespace, names[i][0]) == 0 &&
                                strcmp(objs[k]->meta.name, names[i][1]) == 0;
                assert_int_equal(seen, 1);
        }
        free(objs);
        assert_int_equal(se_store_list_unordered(s, SE_KIND_SERVICE, "b", &objs), 2);
        free(objs);
        assert_int_equal(se_store_list_unordered(s, SE_KIND_SERVICE, "none", &objs), 0);
        assert_null(objs);
        const char **nss;
        assert_int_equal(se_store_namespaces(s, SE_KIND_SERVICE, &nss), 2);
        assert_string_equal(nss[0], "a");
        assert_string_equal(nss[1], "b");
        free(nss);
        /* deleting the last object of a namespace drops the namespace */
        se_store_delete(s, SE_KIND_SERVICE, "a", "x");
        se_store_delete(s, SE_KIND_SERVICE, "a", "y");
        assert_int_equal(se_store_namespaces(s, SE_KIND_SERVICE, &nss), 1);
        free(nss);
        se_store_free(s);
}

static void test_store__select_by_labels(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        se_store_put(s, make(SE_KIND_POD, "ns", "p1", "web"));
        se_store_put(s, make(SE_KIND_POD, "ns", "p2", "db"));
        se_store_put(s, make(SE_KIND_POD, "ns", "p3", NULL));
        se_store_put(s, make(SE_KIND_POD, "other", "p4", "web"));
        struct se_kv want = { "app", "web" };
        struct se_kvlist sel = { &want, 1 };
        const struct se_object **objs;
        assert_int_equal(se_store_select(s, SE_KIND_POD, "ns", &sel, &objs), 1);
        assert_string_equal(objs[0]->meta.name, "p1");
        free(objs);
        assert_int_equal(se_store_select(s, SE_KIND_POD, NULL, &sel, &objs), 2);
        free(objs);
        struct se_kvlist empty = { NULL, 0 };
        assert_int_equal(se_store_select(s, SE_KIND_POD, "ns", &empty, &objs), 3);
        free(objs);
        /* the label index follows updates and deletes */
        se_store_put(s, make(SE_KIND_POD, "ns", "p1", "db"));
        assert_int_equal(se_store_select(s, SE_KIND_POD, "ns", &sel, &objs), 0);
        se_store_put(s, make(SE_KIND_POD, "ns", "p3", "web"));
        se_store_put(s, make(SE_KIND_POD, "ns", "p5", "web"));
        assert_int_equal(se_store_select(s, SE_KIND_POD, "ns", &sel, &objs), 2);
        assert_string_equal(objs[0]->meta.name, "p3");
        assert_string_equal(objs[1]->meta.name, "p5");
        free(objs);
        se_store_delete(s, SE_KIND_POD, "ns", "p3");
        assert_int_equal(se_store_select(s, SE_KIND_POD, "ns", &sel, &objs), 1);
        assert_string_equal(objs[0]->meta.name, "p5");
        free(objs);
        struct se_kv two[] = { { "app", "web" }, { "zone", "a" } };
        struct se_kvlist both = { two, 2 };
        assert_int_equal(se_store_select(s, SE_KIND_POD, "ns", &both, &objs), 0);
        se_store_free(s);
}

static void test_store__references_outlive_removal(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        se_store_put(s, make(SE_KIND_POD, "ns", "p1", "web"));
        struct se_object *held = se_object_ref(
                SE_UNCONST(struct se_object, se_store_get(s, SE_KIND_POD, "ns", "p1")));
        se_store_delete(s, SE_KIND_POD, "ns", "p1");
        assert_string_equal(held->meta.name, "p1");
        se_object_unref(held);
        se_store_free(s);
}

/* Many puts, adds, replacements and deletes across index resizes in two
 * namespaces, checked against a plain table after each batch: get, counts,
 * sorted lists, label selects and the callbacks. */
#define CHURN_NAMES 700

struct churn_ref {
        int64_t gen[2][CHURN_NAMES]; /* 0: absent */
        int app[2][CHURN_NAMES];
};

static void churn_check(const struct se_store *s, const struct churn_ref *ref)
{
        static const char *const nss[] = { "ns-a", "ns-b" };
        size_t total = 0;
        for (int n = 0; n < 2; n++) {
                size_t present = 0, by_app[4] = { 0 };
                for (int i = 0; i < CHURN_NAMES; i++) {
                        char name[16];
                        snprintf(name, sizeof(name), "pod-%d", i);
                        const struct se_object *o = se_store_get(s, SE_KIND_POD, nss[n], name);
                        if (!ref->gen[n][i]) {
                                assert_null(o);
                                continue;
                        }
                        assert_non_null(o);
                        assert_int_equal(se_meta_generation(&o->meta), ref->gen[n][i]);
                        present++;
                        by_app[ref->app[n][i]]++;
                }
                total += present;
                assert_int_equal(se_store_count(s, SE_KIND_POD, nss[n]), present);
                const struct se_object **objs;
                assert_int_equal(se_store_list(s, SE_KIND_POD, nss[n], &objs), (long)present);
                for (size_t k = 1; k < present; k++)
                        assert_true(strcmp(objs[k - 1]->meta.name, objs[k]->meta.name) < 0);
                free(objs);
                for (int a = 0; a < 4; a++) {
                        char app[8];
                        snprintf(app, sizeof(app), "a%d", a);
                        struct se_kv want = { "app", app };
                        struct se_kvlist sel = { &want, 1 };
                        assert_int_equal(se_store_select(s, SE_KIND_POD, nss[n], &sel, &objs),
                                         (long)by_app[a]);
                        for (size_t k = 0; k < by_app[a]; k++)
                                assert_string_equal(se_kvlist_get(&objs[k]->meta.labels, "app"),
                                                    app);
                        free(objs);
                }
        }
        assert_int_equal(se_store_count(s, SE_KIND_POD, NULL), total);
}

static void test_store__churn_matches_reference(void **state)
{
        (void)state;
        static const char *const nss[] = { "ns-a", "ns-b" };
        struct churn_ref *ref = calloc(1, sizeof(*ref));
        assert_non_null(ref);
        struct se_store *s = se_store_new();
        struct events ev = { 0 };
        assert_int_equal(se_store_subscribe(s, SE_KIND_POD, on_change, &ev), 0);
        int adds = 0, updates = 0, deletes = 0;
        int64_t gen = 0;
        srand(7);
        for (int step = 0; step < 20000; step++) {
                int n = rand() % 2, i = rand() % CHURN_NAMES, op = rand() % 10;
                if (step > 14000)
                        op = op < 7 ? 9 : op; /* drain: deletes shift the chains */
                char name[16], app[8];
                snprintf(name, sizeof(name), "pod-%d", i);
                int a = rand() % 4;
                snprintf(app, sizeof(app), "a%d", a);
                if (op < 5) {
                        struct se_object *o = make(SE_KIND_POD, nss[n], name, app);
                        se_meta_more(&o->meta, &o->arena)->generation = ++gen;
                        assert_int_equal(se_store_put(s, o), 0);
                        *(ref->gen[n][i] ? &updates : &adds) += 1;
                        ref->gen[n][i] = gen;
                        ref->app[n][i] = a;
                } else if (op < 7) {
                        struct se_object *o = make(SE_KIND_POD, nss[n], name, app);
                        se_meta_more(&o->meta, &o->arena)->generation = ++gen;
                        int r = se_store_add(s, o);
                        if (ref->gen[n][i]) {
                                assert_int_equal(r, -EEXIST);
                        } else {
                                assert_int_equal(r, 0);
                                adds++;
                                ref->gen[n][i] = gen;
                                ref->app[n][i] = a;
                        }
                } else {
                        int r = se_store_delete(s, SE_KIND_POD, nss[n], name);
                        assert_int_equal(r, ref->gen[n][i] ? 0 : -ENOENT);
                        deletes += r == 0;
                        ref->gen[n][i] = 0;
                }
                if (step % 1999 == 0)
                        churn_check(s, ref);
        }
        churn_check(s, ref);
        assert_int_equal(ev.adds, adds);
        assert_int_equal(ev.updates, updates);
        assert_int_equal(ev.deletes, deletes);
        se_store_free(s);
        free(ref);
}

static size_t heap_bytes(void)
{
        struct mallinfo2 m = mallinfo2();
        return m.uordblks + m.hblkhd;
}

/* Heap growth of a store of n objects of ns/o<i>, labelled app=a<i> or
 * unlabelled. */
static size_t store_growth(struct se_store **ret, int n, bool labelled)
{
        struct se_object **objs = calloc((size_t)n, sizeof(*objs));
        assert_non_null(objs);
        for (int i = 0; i < n; i++) {
                char name[16], app[16];
                snprintf(name, sizeof(name), "o%d", i);
                snprintf(app, sizeof(app), "a%d", i);
                objs[i] = make(SE_KIND_ENDPOINT_SLICE, "ns", name, labelled ? app : NULL);
        }
        struct se_store *s = se_store_new();
        size_t before = heap_bytes();
        for (int i = 0; i < n; i++)
                assert_int_equal(se_store_put(s, objs[i]), 0);
        size_t grown = heap_bytes() - before;
        free(objs);
        *ret = s;
        return grown;
}

struct first_select {
        const struct se_store *s;
        long found;
};

static void *select_a7(void *data)
{
        struct first_select *f = data;
        struct se_kv want = { "app", "a7" };
        struct se_kvlist sel = { &want, 1 };
        const struct se_object **objs;
        se_store_rdlock(f->s);
        f->found = se_store_select(f->s, SE_KIND_ENDPOINT_SLICE, "ns", &sel, &objs);
        se_store_unlock(f->s);
        free(objs);
        return NULL;
}

/* A kind's label index is built by its first select, not kept from the
 * start: svcenv-dns never selects, and 10,000 slices' postings cost it
 * 1.4 MB. Changes before that select are all found by it, and readers
 * that make it at once agree. */
static void test_store__label_index_from_first_select(void **state)
{
        (void)state;
        enum { N = 2000 };
        struct se_store *plain, *labelled;
        size_t g0 = store_growth(&plain, N, false), g1 = store_growth(&labelled, N, true);
        size_t per = g1 > g0 ? (g1 - g0) / N : 0;
        print_message("labels before any select: %zu bytes per object\n", per);
        assert_true(per < 16);
        se_store_free(plain);
        /* changes before the first select */
        assert_int_equal(se_store_put(labelled, make(SE_KIND_ENDPOINT_SLICE, "ns", "o8", "a7")), 0);
        assert_int_equal(se_store_delete(labelled, SE_KIND_ENDPOINT_SLICE, "ns", "o7"), 0);
        assert_int_equal(se_store_put(labelled, make(SE_KIND_ENDPOINT_SLICE, "other", "x", "a7")),
                         0);
        struct first_select f[2] = { { labelled, -1 }, { labelled, -1 } };
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
                assert_int_equal(pthread_create(&th[i], NULL, select_a7, &f[i]), 0);
        for (int i = 0; i < 2; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(f[0].found, 1);
        assert_int_equal(f[1].found, 1);
        /* and after it, the index follows */
        assert_int_equal(se_store_put(labelled, make(SE_KIND_ENDPOINT_SLICE, "ns", "o9", "a7")), 0);
        struct se_kv want = { "app", "a7" };
        struct se_kvlist sel = { &want, 1 };
        const struct se_object **objs;
        assert_int_equal(se_store_select(labelled, SE_KIND_ENDPOINT_SLICE, "ns", &sel, &objs), 2);
        assert_string_equal(objs[0]->meta.name, "o8");
        assert_string_equal(objs[1]->meta.name, "o9");
        free(objs);
        assert_int_equal(se_store_select(labelled, SE_KIND_ENDPOINT_SLICE, NULL, &sel, &objs), 3);
        free(objs);
        se_store_free(labelled);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_store__put_replace_delete_with_callbacks),
                cmocka_unit_test(test_store__list_sorted_and_by_namespace),
                cmocka_unit_test(test_store__select_by_labels),
                cmocka_unit_test(test_store__references_outlive_removal),
                cmocka_unit_test(test_store__churn_matches_reference),
                cmocka_unit_test(test_store__label_index_from_first_select),
        };
        return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
