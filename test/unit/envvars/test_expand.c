/* $(VAR) expansion: every case of upstream's expand_test.go (single and dual
 * mapping), TestMapReference, and the UTF-8 quirk of the byte after `$`. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/envvars.h>

struct ctx {
        const struct se_kv *maps[2];
        size_t n[2];
};

static const char *lookup(void *data, const char *name, size_t len)
{
        const struct ctx *c = data;
        for (size_t m = 0; m < 2; m++)
                for (size_t i = 0; i < c->n[m]; i++)
                        if (strlen(c->maps[m][i].key) == len &&
                            memcmp(c->maps[m][i].key, name, len) == 0)
                                return c->maps[m][i].value;
        return NULL;
}

static void check(const struct ctx *c, const char *in, const char *want)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_envvars_expand(in, strlen(in), lookup, (void *)(uintptr_t)c, &sb), 0);
        if (strcmp(sb.buf, want) != 0)
                fail_msg("expand(\"%s\") = \"%s\", want \"%s\"", in, sb.buf, want);
        se_strbuf_release(&sb);
}

/* doExpansionTest of expand_test.go, every case in its order. */
static const char *const cases[][2] = {
        { "$(VAR_A)", "A" }, /* whole string */
        { "$(VAR_A)-$(VAR_A)", "A-A" }, /* repeat */
        { "$(VAR_A)-1", "A-1" }, /* beginning */
        { "___$(VAR_B)___", "___B___" }, /* middle */
        { "___$(VAR_C)", "___C" }, /* end */
        { "$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C" }, /* compound */
        { "$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A" }, /* escape & expand */
        { "$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)" }, /* compound escape */
        { "f000-$$VAR_A", "f000-$VAR_A" }, /* mixed in escapes */
        { "foo\\$(VAR_C)bar", "foo\\Cbar" }, /* backslash escape ignored */
        { "foo\\\\$(VAR_C)bar", "foo\\\\Cbar" }, /* backslash escape ignored */
        { "foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar" }, /* lots of backslashes */
        { "$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))" }, /* nested var references */
        { "$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)" }, /* nested, second type */
        { "$(VAR_REF)", "$(VAR_A)" }, /* value is a reference */
        { "%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%" }, /* reference x 2 */
        { "foo$(VAR_EMPTY)bar", "foobar" }, /* empty var */
        { "foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!" }, /* unterminated expression */
        { "f00__(VAR_A)__", "f00__(VAR_A)__" }, /* expression without operator */
        { "$?_boo_$!", "$?_boo_$!" }, /* shell special vars */
        { "$VAR_A", "$VAR_A" }, /* bare operators ignored */
        { "$(VAR_DNE)", "$(VAR_DNE)" }, /* undefined passed through */
        { "$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)" }, /* even operators, undefined */
        { "$$$$$$(VAR_A)", "$$$(VAR_A)" }, /* even operators, defined */
        { "$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)" }, /* odd operators, undefined */
        { "$$$$$$$(VAR_A)", "$$$A" }, /* odd operators, defined */
        { "$VAR_A)", "$VAR_A)" }, /* missing open expression */
        { "${VAR_A}", "${VAR_A}" }, /* shell syntax ignored */
        { "$(VAR_B)_______$(A", "B_______$(A" }, /* trailing incomplete */
        { "$(VAR_C)_______$(", "C_______$(" }, /* trailing incomplete, empty */
        { "$(VAR_A)foobarzab$", "Afoobarzab$" }, /* operator at end kept */
        { "foo-\\$(VAR_A", "foo-\\$(VAR_A" }, /* shell escaped incomplete */
        { "--$($($($($--", "--$($($($($--" }, /* lots of $( in middle */
        { "$($($($($--foo$(", "$($($($($--foo$(" }, /* lots of $( in beginning */
        { "foo0--$($($($(", "foo0--$($($($(" }, /* lots of $( at end */
        { "$(foo$$var)", "$(foo$$var)" }, /* escaped operators in names */
        { "\n", "\n" }, /* newline not expanded */
};

static const struct se_kv all[] = { { "VAR_A", "A" },
                                    { "VAR_B", "B" },
                                    { "VAR_C", "C" },
                                    { "VAR_REF", "$(VAR_A)" },
                                    { "VAR_EMPTY", "" } };
static const struct se_kv dual1[] = { { "VAR_A", "A" }, { "VAR_EMPTY", "" } };
static const struct se_kv dual2[] = { { "VAR_B", "B" },
                                      { "VAR_C", "C" },
                                      { "VAR_REF", "$(VAR_A)" } };

static void test_expand__mapping(void **state)
{
        (void)state;
        struct ctx c = { { all, NULL }, { 5, 0 } };
        assert_int_equal(SE_ARRAY_SIZE(cases), 37);
        for (size_t i = 0; i < SE_ARRAY_SIZE(cases); i++)
                check(&c, cases[i][0], cases[i][1]);
}

static void test_expand__mapping_dual(void **state)
{
        (void)state;
        struct ctx c = { { dual1, dual2 }, { 2, 3 } };
        for (size_t i = 0; i < SE_ARRAY_SIZE(cases); i++)
                check(&c, cases[i][0], cases[i][1]);
}

/* TestMapReference: each value expanded in order against the declared map
 * (which holds the raw values first and then the expanded ones). */
static void test_expand__map_reference(void **state)
{
        (void)state;
        struct se_kv declared[] = { { "FOO", "bar" },
                                    { "ZOO", "$(FOO)-1" },
                                    { "BLU", "$(ZOO)-2" } };
        struct ctx c = { { declared, NULL }, { 3, 0 } };
        char *out[3];
        for (size_t i = 0; i < 3; i++) {
                struct se_strbuf sb;
                se_strbuf_init(&sb, 0);
                const char *v = declared[i].value;
                assert_int_equal(se_envvars_expand(v, strlen(v), lookup, &c, &sb), 0);
                out[i] = se_strbuf_detach(&sb, NULL);
                declared[i].value = out[i];
        }
        assert_string_equal(out[0], "bar");
        assert_string_equal(out[1], "bar-1");
        assert_string_equal(out[2], "bar-1-2");
        for (size_t i = 0; i < 3; i++)
                free(out[i]);
}

/* The character after `$` is decoded as UTF-8 (Go's utf8.DecodeRuneInString):
 * a valid sequence is copied, an invalid first byte becomes U+FFFD. */
static void test_expand__utf8_after_operator(void **state)
{
        (void)state;
        struct ctx c = { { all, NULL }, { 5, 0 } };
        check(&c, "$\xc3\xa9t\xc3\xa9", "$\xc3\xa9t\xc3\xa9"); /* valid 2-byte */
        check(&c, "$\xe2\x82\xac", "$\xe2\x82\xac"); /* valid 3-byte */
        check(&c, "$\xf0\x9f\x98\x80", "$\xf0\x9f\x98\x80"); /* valid 4-byte */
        check(&c,
              "a$\xff"
              "b",
              "a$\xef\xbf\xbd"
              "b"); /* invalid byte */
        check(&c, "$\xc3", "$\xef\xbf\xbd"); /* truncated */
        check(&c, "$\xed\xa0\x80", "$\xef\xbf\xbd\xa0\x80"); /* surrogate */
        check(&c, "$\xc0\xaf", "$\xef\xbf\xbd\xaf"); /* overlong */
        check(&c, "$\xf4\x90\x80\x80", "$\xef\xbf\xbd\x90\x80\x80"); /* past U+10FFFF */
        check(&c, "x\xff$(VAR_A)\xff",
              "x\xff"
              "A\xff"); /* elsewhere: bytes kept */
        check(&c, "$()", "$()"); /* empty name */
        check(&c, "$", "$");
        check(&c, "", "");
}

static void test_expand__output_cap(void **state)
{
        (void)state;
        struct se_kv big[] = { { "X", "0123456789" } };
        struct ctx c = { { big, NULL }, { 1, 0 } };
        struct se_strbuf sb;
        se_strbuf_init(&sb, 16);
        assert_int_equal(se_envvars_expand("$(X)$(X)", 8, lookup, &c, &sb), -E2BIG);
        se_strbuf_release(&sb);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_expand__mapping),
                cmocka_unit_test(test_expand__mapping_dual),
                cmocka_unit_test(test_expand__map_reference),
                cmocka_unit_test(test_expand__utf8_after_operator),
                cmocka_unit_test(test_expand__output_cap),
        };
        return cmocka_run_group_tests_name("expand", tests, NULL, NULL);
}
