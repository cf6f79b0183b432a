/* Change tracking for partial iptables syncs: per service port, a digest of
 * the nat chains it wrote and their names. A service whose digest did not
 * change since the last applied sync is left out of the next restore input;
 * chains no service writes any more are deleted. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/hash.h>
#include <svcenv/hashmap.h>
#include <svcenv/proxy.h>
#include <svcenv/strv.h>

#include "proxy_internal.h"

struct entry {
        char *key; /* "spn/proto", owned; the map's key points here */
        uint8_t digest[SE_SHA256_LEN];
        char *names; /* the chain names, each NUL-terminated, one after the other */
        size_t names_len;
};

#define names_foreach(c, e) \
        for (const char *c = (e)->names; c && c < (e)->names + (e)->names_len; c += strlen(c) + 1)

static bool names_has(const struct entry *e, const char *name)
{
        names_foreach(c, e) {
                if (strcmp(c, name) == 0)
                        return true;
        }
        return false;
}

struct state {
        struct se_hashmap map; /* key -> struct entry */
};

struct se_proxy_tracker {
        struct state current; /* what the last applied sync wrote */
        struct state pending; /* what the sync being built writes */
        bool full; /* the next (or current) sync is full */
        struct proxy_top top;
        bool last_partial;
};

static void entry_free(struct entry *e)
{
        if (!e)
                return;
        free(e->names);
        free(e->key);
        free(e);
}

static void state_release(struct state *st)
{
        const char *k;
        void *v;
        for (size_t it = 0; se_hashmap_next(&st->map, &it, &k, &v);)
                entry_free(v);
        se_hashmap_release(&st->map);
}

struct se_proxy_tracker *se_proxy_tracker_new(void)
{
        struct se_proxy_tracker *tr = calloc(1, sizeof(*tr));
        if (tr)
                tr->full = true;
        return tr;
}

struct se_proxy_tracker *se_proxy_tracker_free(struct se_proxy_tracker *tr)
{
        if (tr) {
                state_release(&tr->current);
                state_release(&tr->pending);
                proxy_top_release(tr->top.cur);
                proxy_top_release(tr->top.pend);
                free(tr);
        }
        return NULL;
}

void se_proxy_tracker_force_full(struct se_proxy_tracker *tr)
{
        tr->full = true;
}

void se_proxy_tracker_set_minimal(struct se_proxy_tracker *tr, bool on)
{
        tr->top.minimal = on;
        tr->top.known = false;
}

struct proxy_top *proxy_tracker_top(struct se_proxy_tracker *tr)
{
        return tr->top.minimal ? &tr->top : NULL;
}

void proxy_tracker_begin(struct se_proxy_tracker *tr)
{
        state_release(&tr->pending);
        memset(&tr->pending, 0, sizeof(tr->pending));
}

/* Names a segment defines: iptables chain lines (":NAME - [0:0]") give
 * "NAME"; nft blocks ("\tchain NAME {", "\tset NAME {") give "chain NAME"
 * and "set NAME". Appended to out, each NUL-terminated. */
static void chain_names(const char *text, size_t len, struct se_strbuf *out)
{
        const char *p = text, *end = text + len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (n > 1 && p[0] == ':') {
                        size_t k = 0;
                        while (k < n - 1 && p[1 + k] != ' ')
                                k++;
                        se_strbuf_append(out, p + 1, k);
                        se_strbuf_append(out, "", 1);
                } else if (n > 7 &&
                           (strncmp(p, "\tchain ", 7) == 0 || strncmp(p, "\tset ", 5) == 0)) {
                        const char *brace = memchr(p, '{', n);
                        size_t k = brace && brace > p + 2 ? (size_t)(brace - p) - 2 : n - 1;
                        se_strbuf_append(out, p + 1, strnlen(p + 1, k));
                        se_strbuf_append(out, "", 1);
                }
                p += n + 1;
        }
}

bool proxy_tracker_full(const struct se_proxy_tracker *tr)
{
        return tr->full;
}

int proxy_tracker_segment(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                          struct se_strbuf *chains, size_t chains_at, struct se_strbuf *rules,
                          size_t rules_at)
{
        struct entry *e = calloc(1, sizeof(*e));
        size_t klen = strlen(sp->spn) + strlen(sp->proto) + 2;
        int r = -ENOMEM;
        if (!e || !(e->key = malloc(klen)))
                goto fail;
        strcpy(e->key, sp->spn);
        strcat(e->key, "/");
        strcat(e->key, sp->proto);
        /* digest of chain lines and rules together, separated */
        size_t nc = chains->len - chains_at, nr = rules->len - rules_at;
        const struct se_sha256_part parts[] = { { chains->buf + chains_at, nc },
                                                { "", 1 },
                                                { rules->buf + rules_at, nr } };
        if ((r = se_sha256_parts(parts, SE_ARRAY_SIZE(parts), e->digest)) < 0)
                goto fail;
        struct se_strbuf names;
        se_strbuf_init(&names, 0);
        chain_names(chains->buf + chains_at, nc, &names);
        chain_names(rules->buf + rules_at, nr, &names);
        if ((r = se_strbuf_failed(&names)) < 0) {
                se_strbuf_release(&names);
                goto fail;
        }
        e->names_len = names.len;
        if (names.len && !(e->names = se_strbuf_detach(&names, NULL))) {
                r = -ENOMEM;
                goto fail;
        }
        void *old = NULL;
        if ((r = se_hashmap_put(&tr->pending.map, e->key, e, &old)) < 0)
                goto fail;
        entry_free(old); /* the same spn twice cannot happen; be safe */
        const struct entry *prev = se_hashmap_get(&tr->current.map, e->key);
        if (!tr->full && prev && memcmp(prev->digest, e->digest, SE_SHA256_LEN) == 0) {
                se_strbuf_truncate(chains, chains_at);
                se_strbuf_truncate(rules, rules_at);
        }
        return 0;
fail:
        entry_free(e);
        return r < 0 ? r : -ENOMEM;
}

/* Every name the sync being built writes, into set. */
static int pending_names(struct se_proxy_tracker *tr, struct se_hashmap *set)
{
        const char *k;
        void *v;
        for (size_t it = 0; se_hashmap_next(&tr->pending.map, &it, &k, &v);)
                names_foreach(c, (struct entry *)v) {
                        if (se_hashmap_put(set, c, SE_UNCONST(char, c), NULL) < 0)
                                return -ENOMEM;
                }
        return 0;
}

int proxy_tracker_gone(struct se_proxy_tracker *tr, struct se_strv *gone)
{
        const char *k;
        void *v;
        struct se_hashmap now_chains = SE_HASHMAP_INIT; /* every name this sync writes */
        bool built = false;
        int r = 0;
        /* a name may be in several entries (the seeded "existing" one and a
         * service's): each is deleted once, or the restore fails */
        for (size_t it = 0; r == 0 && se_hashmap_next(&tr->current.map, &it, &k, &v);) {
                const struct entry *e = v;
                const struct entry *now = se_hashmap_get(&tr->pending.map, e->key);
                /* same text, same names: all written again */
                if (now && memcmp(now->digest, e->digest, SE_SHA256_LEN) == 0)
                        continue;
                names_foreach(c, e) {
                        if (now && names_has(now, c))
                                continue;
                        if (!built) { /* only when some name may be gone */
                                built = true;
                                if ((r = pending_names(tr, &now_chains)) < 0)
                                        break;
                        }
                        if (se_hashmap_get(&now_chains, c))
                                continue;
                        if (se_hashmap_put(&now_chains, c, SE_UNCONST(char, c), NULL) < 0 ||
                            se_strv_push(gone, c) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                }
        }
        se_strv_sort(gone); /* deterministic output */
        se_hashmap_release(&now_chains);
        return r;
}

int proxy_tracker_deletions(struct se_proxy_tracker *tr, struct se_strbuf *chains,
                            struct se_strbuf *rules)
{
        struct se_strv gone = SE_STRV_INIT;
        int r = proxy_tracker_gone(tr, &gone);
        se_strv_foreach(c, &gone) {
                se_strbuf_printf(chains, ":%s - [0:0]\n", *c);
                se_strbuf_printf(rules, "-X %s\n", *c);
        }
        se_strv_release(&gone);
        return r;
}

bool se_proxy_tracker_done(struct se_proxy_tracker *tr, bool ok)
{
        bool partial = !tr->full;
        if (ok) {
                state_release(&tr->current);
                tr->current = tr->pending;
                tr->full = false;
                proxy_top_release(tr->top.cur);
                memcpy(tr->top.cur, tr->top.pend, sizeof(tr->top.cur));
                memset(tr->top.pend, 0, sizeof(tr->top.pend));
                tr->top.known = tr->top.minimal;
        } else {
                state_release(&tr->pending);
                tr->full = true;
                proxy_top_release(tr->top.pend);
                tr->top.known = false;
        }
        memset(&tr->pending, 0, sizeof(tr->pending));
        tr->last_partial = partial;
        return partial;
}

int se_proxy_tracker_seed(struct se_proxy_tracker *tr, const struct se_strv *chains)
{
        /* an entry no service port has: everything in it not written again
         * is deleted by the next sync */
        static const char key[] = "\001existing";
        struct entry *e = calloc(1, sizeof(*e));
        if (!e || !(e->key = strdup(key))) {
                entry_free(e);
                return -ENOMEM;
        }
        struct se_strbuf names;
        se_strbuf_init(&names, 0);
        se_strv_foreach(c, chains) {
                se_strbuf_puts(&names, *c);
                se_strbuf_append(&names, "", 1);
        }
        e->names_len = names.len;
        if (se_strbuf_failed(&names) || (names.len && !(e->names = se_strbuf_detach(&names, NULL)))) {
                se_strbuf_release(&names);
                entry_free(e);
                return -ENOMEM;
        }
        void *old = NULL;
        if (se_hashmap_put(&tr->current.map, e->key, e, &old) < 0) {
                entry_free(e);
                return -ENOMEM;
        }
        entry_free(old);
        return 0;
}
