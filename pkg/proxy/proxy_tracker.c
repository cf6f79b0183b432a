/* Change tracking for partial iptables syncs: per service port, the text of
 * the nat chains it wrote (kept, to compare with the next sync's). A service
 * whose text did not change since the last applied sync is left out of the
 * next restore input; chains no service writes any more are deleted. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/arena.h>
#include <svcenv/hashmap.h>
#include <svcenv/proxy.h>
#include <svcenv/strv.h>

#include "proxy_internal.h"

/* One service port's segment: its chain lines at off and its rules at roff
 * in its state's parts. Comparing the text itself is cheaper than digesting
 * it (a full sync writes tens of MiB) and exact. */
struct entry {
        char *key; /* "spn/proto", in the state's arena; the map's key points here */
        size_t off, n_chains, roff, n_rules;
        bool same; /* pending: equal to the current entry of the key */
        bool rules_named; /* names are defined in the rules part too (nft) */
        char *names; /* the seeded entry: names, each NUL-terminated */
        size_t names_len;
        bool has_top; /* iptables: top holds a digest of the port's top-level rules */
        uint8_t top[16];
};

/* A carried sync's replacement of one entry of current (made real when the
 * sync is applied). */
enum carry_kind { CARRY_REPLACE, CARRY_ADD, CARRY_REMOVE };
struct carry {
        struct entry *e; /* CARRY_ADD: a new entry, put in the map when applied */
        enum carry_kind kind;
        size_t off, n_chains, roff, n_rules;
        bool has_top; /* top: the port's new top-level digest */
        uint8_t top[16];
};

/* The segments' text is either copied into text, one after the other
 * (partial syncs), or, on full syncs, left where the writer put it: part[0]
 * (chain lines) and part[1] (rules) name the writer's buffers until the
 * writer says where both ended up in its output (proxy_tracker_moved), and
 * se_proxy_tracker_done takes that output over as text. Part k of the
 * text starts at shift[k]. */
struct state {
        struct se_hashmap map; /* key -> struct entry */
        struct se_strbuf text;
        const struct se_strbuf *part[2]; /* NULL: in text */
        size_t shift[2];
        struct se_arena arena; /* the entries and their keys (a sync makes thousands) */
};

struct se_proxy_tracker {
        struct state current; /* what the last applied sync wrote */
        struct state pending; /* what the sync being built writes */
        bool full; /* the next (or current) sync is full */
        struct proxy_top top;
        bool last_partial;
        /* the text buffer of an earlier state, reused by the next pending
         * one: its pages are already there (a sync copies tens of MiB) */
        struct se_strbuf spare;
        bool chains_only; /* the sync being built defines names in chain parts only */
        /* how many entries of current define each name (see gone_counted);
         * built by the first partial sync that needs it, then kept up to
         * date by the partial syncs applied after it */
        struct se_hashmap owners; /* name -> count, as a pointer-sized integer */
        struct se_strbuf owner_block; /* the names counted when built */
        struct se_arena owner_names; /* names added since */
        bool owners_valid;
        bool in_place; /* the sync being built leaves its segments in the output */
        bool lost; /* ... and its output did not get them all (a failed write) */
        struct entry *last_entry; /* the segment recorded last */
        /* a carried sync (proxy_tracker_carry_begin) is being built */
        bool carrying;
        struct carry *carries;
        size_t n_carries, cap_carries;
        size_t carry_mark; /* current.text's length before it */
};

/* Where part k (0: chain lines, 1: rules) of st's segments starts. */
static const char *part_text(const struct state *st, int k)
{
        const struct se_strbuf *b = st->part[k] ? st->part[k] : &st->text;
        return b->buf + st->shift[k];
}

static void owners_drop(struct se_proxy_tracker *tr)
{
        se_hashmap_release(&tr->owners);
        se_strbuf_release(&tr->owner_block);
        se_arena_release(&tr->owner_names);
        tr->owners_valid = false;
}

/* A new entry for key (spn "/" proto when proto is given) in st's arena;
 * NULL when out of memory. */
static struct entry *entry_new(struct state *st, const char *key, const char *proto)
{
        size_t kl = strlen(key), pl = proto ? strlen(proto) + 1 : 0;
        struct entry *e = se_arena_alloc(&st->arena, sizeof(*e));
        char *k = e ? se_arena_alloc(&st->arena, kl + pl + 1) : NULL;
        if (!k)
                return NULL;
        memcpy(k, key, kl);
        if (proto) {
                k[kl] = '/';
                memcpy(k + kl + 1, proto, pl - 1);
        }
        k[kl + pl] = 0;
        e->key = k;
        return e;
}

/* The kept text is part of a restore input the caller built and capped:
 * no cap of its own. */
#define TEXT_MAX (SIZE_MAX / 2)

static void state_init(struct state *st)
{
        memset(st, 0, sizeof(*st));
        se_strbuf_init(&st->text, TEXT_MAX);
}

static void state_release(struct state *st)
{
        const char *k;
        void *v;
        for (size_t it = 0; se_hashmap_next(&st->map, &it, &k, &v);)
                free(((struct entry *)v)->names);
        se_hashmap_release(&st->map);
        se_strbuf_release(&st->text);
        se_arena_release(&st->arena);
        state_init(st);
}

struct se_proxy_tracker *se_proxy_tracker_new(void)
{
        struct se_proxy_tracker *tr = se_calloc(1, sizeof(*tr));
        if (tr) {
                tr->full = true;
                state_init(&tr->current);
                state_init(&tr->pending);
                se_strbuf_init(&tr->spare, TEXT_MAX);
        }
        return tr;
}

struct se_proxy_tracker *se_proxy_tracker_free(struct se_proxy_tracker *tr)
{
        if (tr)
                free(tr->carries);
        if (tr) {
                state_release(&tr->current);
                state_release(&tr->pending);
                se_strbuf_release(&tr->spare);
                owners_drop(tr);
                proxy_top_carry_done(&tr->top, false);
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

void se_proxy_tracker_reset(struct se_proxy_tracker *tr)
{
        owners_drop(tr);
        state_release(&tr->current);
        proxy_top_release(tr->top.cur);
        tr->top.known = false;
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

/* Releases st, keeping its text buffer as the spare when it is bigger. */
static void state_retire(struct se_proxy_tracker *tr, struct state *st)
{
        if (st->text.alloc > tr->spare.alloc) {
                struct se_strbuf t = tr->spare;
                tr->spare = st->text;
                st->text = t;
        }
        state_release(st);
}

void proxy_tracker_begin(struct se_proxy_tracker *tr)
{
        state_retire(tr, &tr->pending);
        tr->last_entry = NULL;
        tr->chains_only = false;
        /* a full sync writes every segment into its output: they are kept
         * there instead of copied (half the memory) */
        tr->in_place = tr->full;
        tr->lost = false;
        if (tr->in_place) {
                proxy_tracker_reserve(tr, 0, tr->current.map.n);
                return;
        }
        /* the spare becomes the new text buffer */
        struct se_strbuf t = tr->pending.text;
        tr->pending.text = tr->spare;
        tr->spare = t;
        se_strbuf_reset(&tr->pending.text);
        proxy_tracker_reserve(tr, tr->current.text.len + tr->current.text.len / 8,
                              tr->current.map.n);
}

void proxy_tracker_moved(struct se_proxy_tracker *tr, int part, const struct se_strbuf *buf,
                         size_t shift)
{
        if (!tr->in_place)
                return;
        tr->pending.part[part] = buf;
        tr->pending.shift[part] = shift;
        tr->lost |= !buf;
}

void proxy_tracker_chains_only(struct se_proxy_tracker *tr)
{
        tr->chains_only = true;
}

void proxy_tracker_reserve(struct se_proxy_tracker *tr, size_t n, size_t entries)
{
        struct se_strbuf *t = &tr->pending.text;
        if (n && !tr->in_place && n < t->max - t->len)
                se_strbuf_grow(t, n);
        /* an entry and its key ("ns/name:port/proto") */
        if (entries && entries < SIZE_MAX / 256)
                (void)se_arena_reserve(&tr->pending.arena, entries * (sizeof(struct entry) + 64));
}

/* Names a segment defines: iptables chain lines (":NAME - [0:0]") give
 * "NAME"; nft blocks ("\tchain NAME {", "\tset NAME {", "\tmap NAME {")
 * give "chain NAME", "set NAME" and "map NAME". Appended to out, each
 * NUL-terminated. */
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
                           (strncmp(p, "\tchain ", 7) == 0 || strncmp(p, "\tset ", 5) == 0 ||
                            strncmp(p, "\tmap ", 5) == 0)) {
                        const char *brace = memchr(p, '{', n);
                        size_t k = brace && brace > p + 2 ? (size_t)(brace - p) - 2 : n - 1;
                        se_strbuf_append(out, p + 1, strnlen(p + 1, k));
                        se_strbuf_append(out, "", 1);
                }
                p += n + 1;
        }
}

/* The names entry e of st defines, appended to out. */
static void entry_names(const struct state *st, const struct entry *e, struct se_strbuf *out)
{
        if (e->names) {
                se_strbuf_append(out, e->names, e->names_len);
                return;
        }
        chain_names(part_text(st, 0) + e->off, e->n_chains, out);
        if (e->rules_named)
                chain_names(part_text(st, 1) + e->roff, e->n_rules, out);
}

#define names_foreach(c, sb) \
 for (const char *c = (sb)->buf; c < (sb)->buf + (sb)->len; c += strlen(c) + 1)

static bool names_has(const struct se_strbuf *names, const char *name)
{
        names_foreach(c, names)
        {
                if (strcmp(c, name) == 0)
                        return true;
        }
        return false;
}

bool proxy_tracker_full(const struct se_proxy_tracker *tr)
{
        return tr->full;
}

int proxy_tracker_segment(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                          struct se_strbuf *chains, size_t chains_at, struct se_strbuf *rules,
                          size_t rules_at)
{
        struct state *pend = &tr->pending;
        struct se_strbuf *text = &pend->text;
        struct entry *e = entry_new(pend, sp->spn, sp->proto);
        if (!e)
                return -ENOMEM;
        e->rules_named = !tr->chains_only;
        tr->last_entry = e;
        e->n_chains = chains->len - chains_at;
        e->n_rules = rules->len - rules_at;
        if (tr->in_place) { /* where the writer has them, for now */
                pend->part[0] = chains;
                pend->part[1] = rules;
                e->off = chains_at;
                e->roff = rules_at;
        } else {
                e->off = text->len;
                e->roff = e->off + e->n_chains;
                se_strbuf_append(text, chains->buf + chains_at, e->n_chains);
                se_strbuf_append(text, rules->buf + rules_at, e->n_rules);
        }
        int r = se_strbuf_failed(text);
        void *old = NULL;
        if (r < 0 || (r = se_hashmap_put(&pend->map, e->key, e, &old)) < 0)
                return r;
        if (old) /* the same spn twice cannot happen; be safe */
                free(((struct entry *)old)->names);
        const struct entry *prev = se_hashmap_get(&tr->current.map, e->key);
        e->same = prev && !prev->names && prev->n_chains == e->n_chains &&
                  prev->n_rules == e->n_rules &&
                  memcmp(part_text(&tr->current, 0) + prev->off, chains->buf + chains_at,
                         e->n_chains) == 0 &&
                  memcmp(part_text(&tr->current, 1) + prev->roff, rules->buf + rules_at,
                         e->n_rules) == 0;
        if (!tr->full && e->same) {
                se_strbuf_truncate(chains, chains_at);
                se_strbuf_truncate(rules, rules_at);
        }
        return 0;
}

/* Puts an entry holding just names under key into st. */
static int put_names(struct state *st, const char *key, struct se_strbuf *names)
{
        struct entry *e = entry_new(st, key, NULL);
        void *old = NULL;
        if (!e || se_strbuf_failed(names) || !(e->names = se_strbuf_detach(names, &e->names_len)) ||
            se_hashmap_put(&st->map, e->key, e, &old) < 0) {
                se_strbuf_release(names);
                if (e)
                        free(e->names);
                return -ENOMEM;
        }
        if (old)
                free(((struct entry *)old)->names);
        return 0;
}

int proxy_tracker_names(struct se_proxy_tracker *tr, const char *key, const char *text, size_t len)
{
        struct se_strbuf names;
        se_strbuf_init(&names, 0);
        chain_names(text, len, &names);
        return put_names(&tr->pending, key, &names);
}

int proxy_tracker_keep(struct se_proxy_tracker *tr, const char *key)
{
        const struct entry *prev = se_hashmap_get(&tr->current.map, key);
        if (!prev)
                return 0;
        struct se_strbuf names;
        se_strbuf_init(&names, 0);
        entry_names(&tr->current, prev, &names);
        return put_names(&tr->pending, key, &names);
}

int proxy_tracker_prev(const struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                       struct se_strv *ret)
{
        char *key;
        if (se_asprintf(&key, "%s/%s", sp->spn, sp->proto) < 0)
                return -ENOMEM;
        const struct entry *e = se_hashmap_get(&tr->current.map, key);
        free(key);
        if (!e)
                return 0;
        struct se_strbuf names;
        se_strbuf_init(&names, 0);
        entry_names(&tr->current, e, &names);
        int r = se_strbuf_failed(&names);
        names_foreach(c, &names)
        {
                if (r == 0)
                        r = se_strv_push(ret, c);
        }
        se_strbuf_release(&names);
        return r;
}

/* Every name the state's entries write: the names into block, the set
 * pointing into it. */
static int state_names(const struct state *st, struct se_strbuf *block, struct se_hashmap *set)
{
        const char *k;
        void *v;
        for (size_t it = 0; se_hashmap_next(&st->map, &it, &k, &v);)
                entry_names(st, v, block);
        if (se_strbuf_failed(block))
                return se_strbuf_failed(block);
        names_foreach(c, block)
        {
                if (se_hashmap_put(set, c, SE_UNCONST(char, c), NULL) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int proxy_tracker_known(const struct se_proxy_tracker *tr, struct se_strbuf *store,
                        struct se_hashmap *names)
{
        return state_names(&tr->current, store, names);
}

/* Adds delta (+1 or -1) to the owner count of every name in names. */
static int owners_add(struct se_proxy_tracker *tr, const struct se_strbuf *names, int delta)
{
        names_foreach(c, names)
        {
                uintptr_t n = (uintptr_t)se_hashmap_get(&tr->owners, c);
                if (delta < 0 && n <= 1) {
                        se_hashmap_remove(&tr->owners, c); /* its text stays in the arena */
                        continue;
                }
                const char *key = c;
                if (n == 0 && !(key = se_arena_strdup(&tr->owner_names, c)))
                        return -ENOMEM;
                if (se_hashmap_put(&tr->owners, key, (void *)(n + (uintptr_t)delta), NULL) < 0)
                        return -ENOMEM;
        }
        return se_strbuf_failed(names);
}

/* The names of the entries of st that are (pending) or whose pending entry
 * is (current) not the same as before, appended to out. */
static void changed_names(const struct se_proxy_tracker *tr, const struct state *st,
                          struct se_strbuf *out)
{
        const char *k;
        void *v;
        for (size_t it = 0; se_hashmap_next(&st->map, &it, &k, &v);) {
                const struct entry *e = v;
                const struct entry *now =
                        st == &tr->pending ? e : se_hashmap_get(&tr->pending.map, k);
                if (!now || !now->same)
                        entry_names(st, e, out);
        }
}

static int owners_build(struct se_proxy_tracker *tr)
{
        const char *k;
        void *v;
        int r;
        owners_drop(tr);
        /* every name into one block first: the map's keys point into it */
        se_strbuf_init(&tr->owner_block, 0);
        for (size_t it = 0; se_hashmap_next(&tr->current.map, &it, &k, &v);)
                entry_names(&tr->current, v, &tr->owner_block);
        r = se_strbuf_failed(&tr->owner_block);
        names_foreach(c, &tr->owner_block)
        {
                uintptr_t n = (uintptr_t)se_hashmap_get(&tr->owners, c);
                if (r == 0 && se_hashmap_put(&tr->owners, c, (void *)(n + 1), NULL) < 0)
                        r = -ENOMEM;
        }
        if (r < 0)
                owners_drop(tr);
        tr->owners_valid = r == 0;
        return r;
}

/* A partial sync's gone names, without listing every name it writes: a
 * name of a changed (or removed) entry of current is still written when an
 * unchanged entry has it (it has more owners than the changed ones) or a
 * changed entry of pending has it. */
static int gone_counted(struct se_proxy_tracker *tr, struct se_strv *gone)
{
        struct se_hashmap cut = SE_HASHMAP_INIT, now = SE_HASHMAP_INIT;
        struct se_strbuf was, is;
        const char *k;
        void *v;
        int r = tr->owners_valid ? 0 : owners_build(tr);
        if (r < 0)
                return r;
        se_strbuf_init(&was, 0);
        se_strbuf_init(&is, 0);
        changed_names(tr, &tr->current, &was);
        changed_names(tr, &tr->pending, &is);
        r = se_strbuf_failed(&was) ?: se_strbuf_failed(&is);
        names_foreach(c, &was)
        {
                uintptr_t n = (uintptr_t)se_hashmap_get(&cut, c);
                if (r == 0 && se_hashmap_put(&cut, c, (void *)(n + 1), NULL) < 0)
                        r = -ENOMEM;
        }
        names_foreach(c, &is)
        {
                if (r == 0 && se_hashmap_put(&now, c, SE_UNCONST(char, c), NULL) < 0)
                        r = -ENOMEM;
        }
        for (size_t it = 0; r == 0 && se_hashmap_next(&cut, &it, &k, &v);)
                if ((uintptr_t)se_hashmap_get(&tr->owners, k) <= (uintptr_t)v &&
                    !se_hashmap_get(&now, k))
                        r = se_strv_push(gone, k);
        se_hashmap_release(&cut);
        se_hashmap_release(&now);
        se_strbuf_release(&was);
        se_strbuf_release(&is);
        return r;
}

/* After an applied partial sync: the owner counts of pending (current to
 * be). Dropped when that fails (the next partial sync builds them anew). */
static void owners_update(struct se_proxy_tracker *tr)
{
        struct se_strbuf was, is;
        se_strbuf_init(&was, 0);
        se_strbuf_init(&is, 0);
        changed_names(tr, &tr->current, &was);
        changed_names(tr, &tr->pending, &is);
        if (owners_add(tr, &was, -1) < 0 || owners_add(tr, &is, 1) < 0)
                owners_drop(tr);
        se_strbuf_release(&was);
        se_strbuf_release(&is);
}

int proxy_tracker_gone(struct se_proxy_tracker *tr, struct se_strv *gone)
{
        const char *k;
        void *v;
        struct se_hashmap now_chains = SE_HASHMAP_INIT; /* every name this sync writes */
        struct se_strbuf all, was, is;
        bool built = false;
        int r = 0;
        if (!tr->full) { /* partial: counted (a full sync lists every name anyway) */
                r = gone_counted(tr, gone);
                if (r == 0)
                        se_strv_sort(gone); /* deterministic output */
                return r;
        }
        se_strbuf_init(&all, 0);
        se_strbuf_init(&was, 0);
        se_strbuf_init(&is, 0);
        /* a name may be in several entries (the seeded "existing" one and a
         * service's): each is deleted once, or the restore fails */
        for (size_t it = 0; r == 0 && se_hashmap_next(&tr->current.map, &it, &k, &v);) {
                const struct entry *e = v;
                const struct entry *now = se_hashmap_get(&tr->pending.map, e->key);
                if (now && now->same) /* same text, same names: all written again */
                        continue;
                se_strbuf_reset(&was);
                se_strbuf_reset(&is);
                entry_names(&tr->current, e, &was);
                if (now)
                        entry_names(&tr->pending, now, &is);
                if ((r = se_strbuf_failed(&was) ?: se_strbuf_failed(&is)) < 0)
                        break;
                names_foreach(c, &was)
                {
                        if (names_has(&is, c))
                                continue;
                        if (!built) { /* only when some name may be gone */
                                built = true;
                                if ((r = state_names(&tr->pending, &all, &now_chains)) < 0)
                                        break;
                        }
                        if (se_hashmap_get(&now_chains, c))
                                continue;
                        /* c lives in was: gone keeps its own copy, the set
                         * points at that one */
                        if ((r = se_strv_push(gone, c)) < 0)
                                break;
                        if (se_hashmap_put(&now_chains, gone->v[gone->n - 1], SE_UNCONST(char, c),
                                           NULL) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                }
        }
        se_strv_sort(gone); /* deterministic output */
        se_hashmap_release(&now_chains);
        se_strbuf_release(&all);
        se_strbuf_release(&was);
        se_strbuf_release(&is);
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

/* The end of a carried sync: applied, its replacements become current;
 * otherwise current is as before (its text cut back) and the next sync is
 * full. */
static void carry_done(struct se_proxy_tracker *tr, bool ok)
{
        tr->carrying = false;
        proxy_top_carry_done(&tr->top, ok);
        if (ok) {
                for (size_t i = 0; i < tr->n_carries; i++) {
                        struct carry *c = &tr->carries[i];
                        if (c->kind == CARRY_REMOVE) {
                                se_hashmap_remove(&tr->current.map, c->e->key);
                                continue;
                        }
                        if (c->kind == CARRY_ADD &&
                            se_hashmap_put(&tr->current.map, c->e->key, c->e, NULL) < 0) {
                                /* the state misses a port: start again whole */
                                tr->full = true;
                                continue;
                        }
                        c->e->off = c->off;
                        c->e->n_chains = c->n_chains;
                        c->e->roff = c->roff;
                        c->e->n_rules = c->n_rules;
                        if (c->has_top) {
                                memcpy(c->e->top, c->top, 16);
                                c->e->has_top = true;
                        }
                }
                if (tr->n_carries)
                        owners_drop(tr); /* names changed owners: counted again when needed */
        } else {
                se_strbuf_truncate(&tr->current.text, tr->carry_mark);
                tr->full = true;
                proxy_top_release(tr->top.pend);
                tr->top.known = false;
        }
        tr->n_carries = 0;
        tr->last_partial = true;
}

bool se_proxy_tracker_done(struct se_proxy_tracker *tr, bool ok, struct se_strbuf *out)
{
        if (tr->carrying) {
                carry_done(tr, ok);
                return true;
        }
        bool partial = !tr->full;
        struct state *pend = &tr->pending;
        if (ok && tr->in_place) {
                /* the segments are in out (proxy_tracker_moved): take it */
                bool there = !tr->lost && out &&
                             (pend->map.n == 0 || (pend->part[0] == out && pend->part[1] == out));
                if (there) {
                        if (pend->text.alloc > tr->spare.alloc) {
                                struct se_strbuf t = tr->spare;
                                tr->spare = pend->text;
                                pend->text = t;
                        }
                        se_strbuf_release(&pend->text);
                        pend->text = *out;
                        pend->text.max = TEXT_MAX;
                        se_strbuf_init(out, out->max);
                }
                pend->part[0] = pend->part[1] = NULL;
                /* without its text the state is of no use: a full sync again */
                ok = there;
        }
        if (ok && partial && tr->owners_valid)
                owners_update(tr);
        else if (ok)
                owners_drop(tr); /* a full sync: counted again when needed */
        if (ok) {
                state_retire(tr, &tr->current);
                tr->current = tr->pending;
                state_init(&tr->pending);
                tr->full = false;
                proxy_top_release(tr->top.cur);
                memcpy(tr->top.cur, tr->top.pend, sizeof(tr->top.cur));
                memset(tr->top.pend, 0, sizeof(tr->top.pend));
                tr->top.known = tr->top.minimal;
        } else {
                state_retire(tr, &tr->pending);
                tr->full = true;
                proxy_top_release(tr->top.pend);
                tr->top.known = false;
        }
        tr->last_partial = partial;
        return partial;
}

int se_proxy_tracker_seed(struct se_proxy_tracker *tr, const struct se_strv *chains)
{
        /* an entry no service port has: everything in it not written again
         * is deleted by the next sync */
        struct se_strbuf names;
        se_strbuf_init(&names, 0);
        se_strv_foreach(c, chains) {
                se_strbuf_puts(&names, *c);
                se_strbuf_append(&names, "", 1);
        }
        owners_drop(tr); /* current changes */
        return put_names(&tr->current, "\001existing", &names);
}

void proxy_tracker_set_top(struct se_proxy_tracker *tr, const uint8_t top[16])
{
        if (tr->last_entry) {
                memcpy(tr->last_entry->top, top, 16);
                tr->last_entry->has_top = true;
        }
}

int proxy_tracker_carry_begin(struct se_proxy_tracker *tr)
{
        if (tr->full || tr->carrying || tr->current.part[0] || tr->current.part[1])
                return -EAGAIN;
        tr->carrying = true;
        tr->n_carries = 0;
        tr->carry_mark = tr->current.text.len;
        return 0;
}

void proxy_tracker_carry_abort(struct se_proxy_tracker *tr)
{
        if (!tr->carrying)
                return;
        se_strbuf_truncate(&tr->current.text, tr->carry_mark);
        proxy_top_carry_done(&tr->top, false);
        tr->carrying = false;
        tr->n_carries = 0;
}

/* Records a carried port's replacement (its text appended to current's,
 * where it stays if the sync fails: cut back by carry_done; chains NULL:
 * the entry keeps its text). */
static int carry_record(struct se_proxy_tracker *tr, struct entry *e, enum carry_kind kind,
                        const uint8_t *top, const char *chains, size_t nc, const char *rules,
                        size_t nr)
{
        struct state *cur = &tr->current;
        if (tr->n_carries == tr->cap_carries) {
                size_t cap = tr->cap_carries ? 2 * tr->cap_carries : 16;
                struct carry *v = se_reallocarray(tr->carries, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                tr->carries = v;
                tr->cap_carries = cap;
        }
        struct se_strbuf *text = &cur->text;
        struct carry *c = &tr->carries[tr->n_carries];
        c->e = e;
        c->kind = kind;
        c->has_top = top != NULL;
        if (top)
                memcpy(c->top, top, 16);
        c->n_chains = nc;
        c->n_rules = nr;
        if (!chains) {
                c->off = e->off;
                c->n_chains = e->n_chains;
                c->roff = e->roff;
                c->n_rules = e->n_rules;
                tr->n_carries++;
                return 0;
        }
        c->off = text->len - cur->shift[0];
        se_strbuf_append(text, chains, nc);
        c->roff = text->len - cur->shift[1];
        se_strbuf_append(text, rules, nr);
        int r = se_strbuf_failed(text);
        if (r < 0)
                return r;
        tr->n_carries++;
        return 0;
}

/* proxy_tracker_carry; top_changed NULL: a top-level change is -EAGAIN */
static int carry_port(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                      const uint8_t top[16], const char *chains, size_t nc, const char *rules,
                      size_t nr, struct se_strbuf *gone_chains, struct se_strbuf *gone_rules,
                      bool *same, bool *top_changed)
{
        struct state *cur = &tr->current;
        char key[600];
        *same = false;
        if ((size_t)snprintf(key, sizeof(key), "%s/%s", sp->spn, sp->proto) >= sizeof(key))
                return -EAGAIN;
        struct entry *e = se_hashmap_get(&cur->map, key);
        if (!e || e->names)
                return -EAGAIN; /* an unknown port: not for a carried sync */
        bool moved = top && (!e->has_top || memcmp(e->top, top, 16) != 0);
        if (moved && !top_changed)
                return -EAGAIN;
        if (top_changed)
                *top_changed = moved;
        for (size_t i = 0; i < tr->n_carries; i++)
                if (tr->carries[i].e == e)
                        return -EAGAIN; /* the same port twice: cannot happen; be safe */
        if (e->n_chains == nc && e->n_rules == nr &&
            memcmp(part_text(cur, 0) + e->off, chains, nc) == 0 &&
            memcmp(part_text(cur, 1) + e->roff, rules, nr) == 0) {
                *same = true;
                /* the chains stay; a new digest is still recorded */
                return moved ? carry_record(tr, e, CARRY_REPLACE, top, NULL, 0, NULL, 0) : 0;
        }
        /* chains the port had and no longer writes: flushed, then deleted
         * (its names are its own: hashes of its spn, protocol, endpoint) */
        struct se_strbuf was, is;
        se_strbuf_init(&was, 0);
        se_strbuf_init(&is, 0);
        entry_names(cur, e, &was);
        chain_names(chains, nc, &is);
        if (e->rules_named)
                chain_names(rules, nr, &is);
        int r = se_strbuf_failed(&was) ?: se_strbuf_failed(&is);
        names_foreach(c, &was)
        {
                if (r == 0 && !names_has(&is, c)) {
                        se_strbuf_printf(gone_chains, ":%s - [0:0]\n", c);
                        se_strbuf_printf(gone_rules, "-X %s\n", c);
                }
        }
        se_strbuf_release(&was);
        se_strbuf_release(&is);
        if (r < 0)
                return r;
        return carry_record(tr, e, CARRY_REPLACE, moved ? top : NULL, chains, nc, rules, nr);
}

int proxy_tracker_carry(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                        const uint8_t top[16], const char *chains, size_t nc, const char *rules,
                        size_t nr, struct se_strbuf *gone_chains, struct se_strbuf *gone_rules,
                        bool *same)
{
        return carry_port(tr, sp, top, chains, nc, rules, nr, gone_chains, gone_rules, same, NULL);
}

int proxy_tracker_carry_top(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                            const uint8_t top[16], const char *chains, size_t nc, const char *rules,
                            size_t nr, struct se_strbuf *gone_chains, struct se_strbuf *gone_rules,
                            bool *same, bool *top_changed)
{
        return carry_port(tr, sp, top, chains, nc, rules, nr, gone_chains, gone_rules, same,
                          top_changed);
}

int proxy_tracker_carry_add(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                            const char *chains, size_t nc, const char *rules, size_t nr)
{
        return proxy_tracker_carry_add_top(tr, sp, NULL, chains, nc, rules, nr);
}

int proxy_tracker_carry_add_top(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                                const uint8_t top[16], const char *chains, size_t nc,
                                const char *rules, size_t nr)
{
        struct state *cur = &tr->current;
        char key[600];
        if ((size_t)snprintf(key, sizeof(key), "%s/%s", sp->spn, sp->proto) >= sizeof(key) ||
            se_hashmap_get(&cur->map, key))
                return -EAGAIN;
        for (size_t i = 0; i < tr->n_carries; i++)
                if (strcmp(tr->carries[i].e->key, key) == 0)
                        return -EAGAIN; /* the same port twice: cannot happen; be safe */
        /* in current's arena: released with it, even if never applied */
        struct entry *e = entry_new(cur, sp->spn, sp->proto);
        if (!e)
                return -ENOMEM;
        memset(&e->off, 0, sizeof(*e) - offsetof(struct entry, off));
        e->rules_named = true; /* nft defines names in both parts (iptables: none in rules) */
        return carry_record(tr, e, CARRY_ADD, top, chains, nc, rules, nr);
}

int proxy_tracker_carry_remove(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                               struct se_strbuf *gone_chains, struct se_strbuf *gone_rules)
{
        struct state *cur = &tr->current;
        char key[600];
        if ((size_t)snprintf(key, sizeof(key), "%s/%s", sp->spn, sp->proto) >= sizeof(key))
                return -EAGAIN;
        struct entry *e = se_hashmap_get(&cur->map, key);
        if (!e || e->names)
                return -EAGAIN;
        for (size_t i = 0; i < tr->n_carries; i++)
                if (tr->carries[i].e == e)
                        return -EAGAIN;
        /* every name it defined goes (its names are its own) */
        struct se_strbuf was;
        se_strbuf_init(&was, 0);
        entry_names(cur, e, &was);
        int r = se_strbuf_failed(&was);
        names_foreach(c, &was)
        {
                if (r == 0) {
                        se_strbuf_printf(gone_chains, ":%s - [0:0]\n", c);
                        se_strbuf_printf(gone_rules, "-X %s\n", c);
                }
        }
        se_strbuf_release(&was);
        return r < 0 ? r : carry_record(tr, e, CARRY_REMOVE, NULL, "", 0, "", 0);
}

void se_proxy_tracker_abandon(struct se_proxy_tracker *tr)
{
        proxy_tracker_carry_abort(tr);
}
