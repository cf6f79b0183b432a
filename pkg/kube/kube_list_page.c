/* One page of a list response, item by item (see kube_client.h).
 *
 * A whole page as one jansson tree costs about twelve times its text (a
 * 2 kB pod is a 24 kB tree; 500 of them 12 MB), and that tree was the
 * controller's peak. Here only the envelope is walked by hand: each item
 * and the list's metadata are parsed alone by jansson (which checks them),
 * so at most one item's tree lives at a time. */
#include <errno.h>
#include <string.h>

#include <svcenv/kube_client.h>

struct page {
        const char *buf;
        size_t len, pos;
        struct se_diag *diag;
};

static void skip_ws(struct page *p)
{
        while (p->pos < p->len && strchr(" \t\r\n", p->buf[p->pos]) && p->buf[p->pos])
                p->pos++;
}

/* True (and consumed) when the next non-blank byte is c. */
static bool eat(struct page *p, char c)
{
        skip_ws(p);
        if (p->pos < p->len && p->buf[p->pos] == c) {
                p->pos++;
                return true;
        }
        return false;
}

static int bad(struct page *p, const char *what)
{
        se_diag_set(p->diag, NULL, 0, 0, "list response is not a JSON list: %s at byte %zu", what,
                    p->pos);
        return -EIO;
}

/* Parses the next JSON value alone (any type); *ret new reference. */
static int next_value(struct page *p, json_t **ret)
{
        json_error_t jerr;
        skip_ws(p);
        json_t *v = json_loadb(p->buf + p->pos, p->len - p->pos,
                               JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!v) {
                se_diag_set(p->diag, NULL, 0, 0, "list response is not JSON: %s at byte %zu",
                            jerr.text, p->pos + (size_t)(jerr.position > 0 ? jerr.position : 0));
                return -EIO;
        }
        if (jerr.position <= 0 || (size_t)jerr.position > p->len - p->pos) {
                json_decref(v);
                return bad(p, "value");
        }
        p->pos += (size_t)jerr.position;
        *ret = v;
        return 0;
}

static int items(struct page *p, se_kube_json_item_fn fn, void *data)
{
        if (eat(p, ']'))
                return 0;
        for (;;) {
                json_t *item;
                int r = next_value(p, &item);
                if (r < 0)
                        return r;
                r = fn(data, item);
                json_decref(item);
                if (r < 0)
                        return r;
                if (eat(p, ']'))
                        return 0;
                if (!eat(p, ','))
                        return bad(p, "expected ',' or ']' in items");
        }
}

int se_kube_list_page_parse(const char *buf, size_t len, json_t **ret_meta, se_kube_json_item_fn fn,
                            void *data, struct se_diag *diag)
{
        struct page p = { buf, len, 0, diag };
        json_t *meta = NULL;
        bool seen_items = false;
        int r = 0;
        *ret_meta = NULL;
        if (!eat(&p, '{'))
                return bad(&p, "expected an object");
        if (eat(&p, '}'))
                goto done;
        for (;;) {
                json_t *key;
                if ((r = next_value(&p, &key)) < 0)
                        break;
                bool is_items = json_is_string(key) && strcmp(json_string_value(key), "items") == 0;
                bool is_meta =
                        json_is_string(key) && strcmp(json_string_value(key), "metadata") == 0;
                bool is_string = json_is_string(key);
                json_decref(key);
                if (!is_string) {
                        r = bad(&p, "expected a key");
                        break;
                }
                if (!eat(&p, ':')) {
                        r = bad(&p, "expected ':'");
                        break;
                }
                if (is_items && !seen_items && eat(&p, '[')) {
                        seen_items = true;
                        if ((r = items(&p, fn, data)) < 0)
                                break;
                } else {
                        /* metadata is kept; null items and anything else are skipped */
                        json_t *v;
                        if ((r = next_value(&p, &v)) < 0)
                                break;
                        if (is_items && !json_is_null(v)) {
                                json_decref(v);
                                r = bad(&p, "items is not a list");
                                break;
                        }
                        if (is_meta) {
                                json_decref(meta);
                                meta = v;
                        } else {
                                json_decref(v);
                        }
                }
                if (eat(&p, '}'))
                        break;
                if (!eat(&p, ',')) {
                        r = bad(&p, "expected ',' or '}'");
                        break;
                }
        }
        if (r == 0) {
                skip_ws(&p);
                if (p.pos != p.len)
                        r = bad(&p, "data after the list");
        }
        if (r < 0) {
                json_decref(meta);
                return r;
        }
done:
        *ret_meta = meta ? meta : json_object();
        return *ret_meta ? 0 : -ENOMEM;
}
