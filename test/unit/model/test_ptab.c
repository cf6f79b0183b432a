/* The store's pointer-only index: get/put/replace/remove against a plain
 * reference, across resizes and long probe chains. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../pkg/model/ptab_internal.h"

struct ent {
        char key[16];
        int version;
};

static const char *ent_key(const void *e)
{
        return ((const struct ent *)e)->key;
}

static struct ent *ent_new(unsigned id, int version)
{
        struct ent *e = calloc(1, sizeof(*e));
        assert_non_null(e);
        snprintf(e->key, sizeof(e->key), "k%u", id);
        e->version = version;
        return e;
}

#define KEYS 3000

/* Every present key is found with its latest entry, absent ones are not,
 * iteration yields each entry once, and the load stays at or below 4/5. */
static void check(const struct ptab *t, struct ent *const *ref)
{
        uint32_t present = 0;
        for (unsigned id = 0; id < KEYS; id++) {
                char key[16];
                snprintf(key, sizeof(key), "k%u", id);
                assert_ptr_equal(model_ptab_get(t, key), ref[id]);
                present += ref[id] != NULL;
        }
        assert_int_equal(t->n, present);
        assert_true((uint64_t)t->n * 5 <= (uint64_t)t->cap * 4);
        uint32_t seen = 0;
        struct ent *e;
        for (uint32_t i = 0; (e = model_ptab_next(t, &i));) {
                unsigned id = (unsigned)strtoul(e->key + 1, NULL, 10);
                assert_ptr_equal(ref[id], e);
                seen++;
        }
        assert_int_equal(seen, present);
}

static void test_ptab__random_ops_match_reference(void **state)
{
        (void)state;
        struct ent **ref = calloc(KEYS, sizeof(*ref));
        assert_non_null(ref);
        struct ptab t = PTAB_INIT(ent_key);
        assert_null(model_ptab_get(&t, "k1"));
        assert_null(model_ptab_remove(&t, "k1"));
        srand(42);
        int version = 0;
        for (int step = 0; step < 60000; step++) {
                /* a small key range first (dense chains in small tables),
                 * then all keys (growth), then mostly removals (shifts) */
                unsigned range = step < 10000 ? 40 : KEYS;
                unsigned id = (unsigned)rand() % range;
                int op = rand() % 10;
                if (step >= 45000)
                        op = op < 8 ? 9 : op;
                char key[16];
                snprintf(key, sizeof(key), "k%u", id);
                if (op < 6) {
                        struct ent *e = ent_new(id, ++version);
                        void *old = (void *)1;
                        assert_int_equal(model_ptab_put(&t, e, &old), 0);
                        assert_ptr_equal(old, ref[id]);
                        free(old);
                        ref[id] = e;
                } else {
                        struct ent *got = model_ptab_remove(&t, key);
                        assert_ptr_equal(got, ref[id]);
                        free(got);
                        ref[id] = NULL;
                        assert_null(model_ptab_get(&t, key));
                }
                if (step % 997 == 0)
                        check(&t, ref);
        }
        check(&t, ref);
        /* empty it completely: every chain must stay findable until the end */
        for (unsigned id = 0; id < KEYS; id++) {
                char key[16];
                snprintf(key, sizeof(key), "k%u", id);
                struct ent *got = model_ptab_remove(&t, key);
                assert_ptr_equal(got, ref[id]);
                free(got);
                ref[id] = NULL;
                if (id % 101 == 0)
                        check(&t, ref);
        }
        assert_int_equal(t.n, 0);
        assert_null(model_ptab_next(&t, &(uint32_t){ 0 }));
        model_ptab_release(&t);
        free(ref);
}

static void test_ptab__grows_by_powers_of_two_at_four_fifths(void **state)
{
        (void)state;
        struct ptab t = PTAB_INIT(ent_key);
        struct ent *e[13];
        for (unsigned i = 0; i < 13; i++) {
                e[i] = ent_new(i, 0);
                assert_int_equal(model_ptab_put(&t, e[i], NULL), 0);
                /* the smallest power of two that keeps n/cap <= 4/5 */
                uint32_t cap = 4;
                while ((uint64_t)(i + 1) * 5 > (uint64_t)cap * 4)
                        cap *= 2;
                assert_int_equal(t.cap, cap);
                assert_int_equal(model_ptab_bytes(&t), cap * sizeof(uintptr_t));
        }
        assert_int_equal(t.cap, 32); /* 13 > 12.8 */
        for (unsigned i = 0; i < 13; i++)
                free(model_ptab_remove(&t, e[i]->key));
        model_ptab_release(&t);
        assert_int_equal(t.cap, 0);
        assert_int_equal(model_ptab_bytes(&t), 0);
}

static void test_ptab__refuses_misaligned_entry(void **state)
{
        (void)state;
        struct ptab t = PTAB_INIT(ent_key);
        struct ent *e = ent_new(1, 0);
        void *old = (void *)1;
        assert_int_equal(model_ptab_put(&t, (char *)e + 1, &old), -EINVAL);
        assert_null(old);
        assert_int_equal(t.n, 0);
        assert_int_equal(model_ptab_put(&t, NULL, NULL), -EINVAL);
        free(e);
        model_ptab_release(&t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ptab__random_ops_match_reference),
                cmocka_unit_test(test_ptab__grows_by_powers_of_two_at_four_fifths),
                cmocka_unit_test(test_ptab__refuses_misaligned_entry),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
