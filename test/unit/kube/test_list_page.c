/* se_kube_list_page_parse: a list page read item by item. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/kube_client.h>

struct seen {
        char names[8][32];
        int n;
        int fail_at; /* 1-based item whose callback fails; 0: none */
};

static int on_item(void *data, const json_t *item)
{
        struct seen *s = data;
        const char *name =
                json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
        if (s->n < 8)
                snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name ? name : "?");
        s->n++;
        return s->fail_at && s->n == s->fail_at ? -ENOSPC : 0;
}

static int parse(const char *text, struct seen *s, json_t **meta)
{
        struct se_diag d = { 0 };
        return se_kube_list_page_parse(text, strlen(text), meta, on_item, s, &d);
}

static void test_list_page__items_and_metadata(void **state)
{
        (void)state;
        struct seen s = { 0 };
        json_t *meta;
        /* the API server's layout, with blanks and escapes inside strings */
        const char *page =
                "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\n"
                " \"metadata\": {\"resourceVersion\":\"42\",\"continue\":\"tok]\\\"en\"},\n"
                " \"items\": [ {\"metadata\":{\"name\":\"a\"},\"x\":[1,{\"y\":\"]}\"}]} ,\n"
                "  {\"metadata\":{\"name\":\"b\"}} ] }\n";
        assert_int_equal(parse(page, &s, &meta), 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.names[0], "a");
        assert_string_equal(s.names[1], "b");
        assert_string_equal(json_string_value(json_object_get(meta, "resourceVersion")), "42");
        assert_string_equal(json_string_value(json_object_get(meta, "continue")), "tok]\"en");
        json_decref(meta);

        /* metadata after the items, null or empty items, no metadata */
        memset(&s, 0, sizeof(s));
        assert_int_equal(parse("{\"items\":[{\"metadata\":{\"name\":\"c\"}}],"
                               "\"metadata\":{\"resourceVersion\":\"7\"}}",
                               &s, &meta),
                         0);
        assert_int_equal(s.n, 1);
        assert_string_equal(json_string_value(json_object_get(meta, "resourceVersion")), "7");
        json_decref(meta);
        memset(&s, 0, sizeof(s));
        assert_int_equal(parse("{\"items\":null}", &s, &meta), 0);
        assert_int_equal(s.n, 0);
        assert_true(json_is_object(meta));
        json_decref(meta);
        assert_int_equal(parse(" { \"items\" : [ ] } ", &s, &meta), 0);
        assert_int_equal(s.n, 0);
        json_decref(meta);
        assert_int_equal(parse("{}", &s, &meta), 0);
        json_decref(meta);
}

static void test_list_page__errors(void **state)
{
        (void)state;
        static const char *const bad[] = {
                "",
                "[]",
                "{\"items\":[{}",
                "{\"items\":[{},]}",
                "{\"items\":[{} {}]}",
                "{\"items\":{}}",
                "{\"items\":\"x\"}",
                "{\"items\":[]",
                "{\"items\":[]} x",
                "{items:[]}",
                "{\"a\" 1}",
                "{\"a\":1,}",
                "{\"a\":tru}",
                "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[{\"a\":\"\\x\"}]}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct seen s = { 0 };
                json_t *meta = (json_t *)&s;
                struct se_diag d = { 0 };
                int r = se_kube_list_page_parse(bad[i], strlen(bad[i]), &meta, on_item, &s, &d);
                if (r != -EIO)
                        fail_msg("%s: got %d", bad[i], r);
                assert_null(meta);
                assert_non_null(strstr(d.text, "JSON"));
        }
        /* the callback's error stops the walk */
        struct seen s = { .fail_at = 2 };
        json_t *meta;
        assert_int_equal(parse("{\"items\":[{},{},{}]}", &s, &meta), -ENOSPC);
        assert_int_equal(s.n, 2);
        assert_null(meta);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_list_page__items_and_metadata),
                cmocka_unit_test(test_list_page__errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
