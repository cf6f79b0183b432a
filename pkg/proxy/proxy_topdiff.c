/* svcenv's smaller partial syncs (beyond kube-proxy): the top-level chains
 * (KUBE-SERVICES, KUBE-NODEPORTS, ... in nat and filter) are left out of a
 * partial restore when their rules did not change, and changed by single
 * rules otherwise: `-D CHAIN <rule>` for rules gone, `-I CHAIN <pos> <rule>`
 * for new ones at the position a full sync would give them, so the kernel
 * ends up with exactly the full sync's rules in the full sync's order.
 *
 * A chain is rewritten whole (declared, so flushed) instead when: the sync
 * is full; the kernel state is not known from an applied minimal sync; the
 * chain was not declared by the last sync; the rules kept would change
 * their order; or the single-rule edits would be more than half of the
 * chain's rules. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

#include "proxy_internal.h"

void proxy_top_release(struct proxy_top_table t[2])
{
        for (int k = 0; k < 2; k++) {
                for (int i = 0; i < PROXY_TOP_MAX; i++)
                        se_strv_release(&t[k].rules[i]);
                memset(&t[k], 0, sizeof(t[k]));
        }
}

static int top_index(const char *const *names, size_t n, const char *name, size_t len)
{
        for (size_t i = 0; i < n; i++)
                if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
                        return (int)i;
        return -1;
}

/* Rules kept in order (a subsequence of both) and the new ones with their
 * 1-based positions. Returns false when the kept rules change order. */
static int edit(const struct se_strv *old, const struct se_strv *now, struct se_strbuf *del,
                struct se_strbuf *ins, size_t *ret_edits, bool *ret_ok)
{
        struct se_hashmap count = SE_HASHMAP_INIT;
        int r = 0;
        size_t edits = 0;
        *ret_ok = false;
        for (size_t i = 0; i < now->n && r == 0; i++) {
                uintptr_t c = (uintptr_t)se_hashmap_get(&count, now->v[i]);
                r = se_hashmap_put(&count, now->v[i], (void *)(c + 1), NULL);
        }
        /* old rules not wanted any more go; the rest is kept (in old order) */
        const char **kept = old->n ? se_calloc(old->n, sizeof(*kept)) : NULL;
        size_t nk = 0;
        if (old->n && !kept)
                r = -ENOMEM;
        for (size_t i = 0; i < old->n && r == 0; i++) {
                uintptr_t c = (uintptr_t)se_hashmap_get(&count, old->v[i]);
                if (c) {
                        r = se_hashmap_put(&count, old->v[i], (void *)(c - 1), NULL);
                        kept[nk++] = old->v[i];
                } else {
                        se_strbuf_printf(del, "-D%s\n", old->v[i] + 2); /* "-A CHAIN ..." */
                        edits++;
                }
        }
        /* new rules: whatever the kept sequence does not match, greedily */
        size_t k = 0;
        for (size_t i = 0; i < now->n && r == 0; i++) {
                if (k < nk && strcmp(kept[k], now->v[i]) == 0) {
                        k++;
                        continue;
                }
                const char *rest = now->v[i] + 3, *sp = strchr(rest, ' ');
                size_t cl = sp ? (size_t)(sp - rest) : strlen(rest);
                se_strbuf_printf(ins, "-I %.*s %zu%s\n", (int)cl, rest, i + 1, rest + cl);
                edits++;
        }
        free(kept);
        se_hashmap_release(&count);
        *ret_ok = r == 0 && k == nk;
        *ret_edits = edits;
        return r;
}

int proxy_top_write(struct proxy_top *top, bool partial, int table, const char *const *names,
                    size_t n_names, const char *chains, size_t nc, const char *rules, size_t nr,
                    struct se_strbuf *out)
{
        struct proxy_top_table *pend = &top->pend[table], *cur = &top->cur[table];
        struct se_strbuf decl, body, del, ins, xs;
        int r = 0;
        if (n_names > PROXY_TOP_MAX)
                return -EINVAL;
        for (int i = 0; i < PROXY_TOP_MAX; i++)
                se_strv_release(&pend->rules[i]);
        memset(pend, 0, sizeof(*pend));
        /* what this sync wants of the top chains */
        for (const char *p = chains, *end = chains + nc; p < end;) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                int i = len > 1 ? top_index(names, n_names, p + 1, strcspn(p + 1, " \n")) : -1;
                if (i >= 0)
                        pend->declared[i] = true;
                p += len + 1;
        }
        for (const char *p = rules, *end = rules + nr; p < end && r == 0;) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                int i = len > 3 && memcmp(p, "-A ", 3) == 0 ?
                                top_index(names, n_names, p + 3, strcspn(p + 3, " \n")) :
                                -1;
                if (i >= 0) {
                        char *line = se_strndup(p, len);
                        r = line ? se_strv_push_consume(&pend->rules[i], line) : -ENOMEM;
                }
                p += len + 1;
        }
        if (r < 0)
                return r;
        if (!partial || !top->known) { /* as kube-proxy: everything as built */
                se_strbuf_add(out, chains, nc);
                se_strbuf_add(out, rules, nr);
                return se_strbuf_failed(out);
        }
        se_strbuf_init(&decl, 0);
        se_strbuf_init(&body, 0);
        se_strbuf_init(&del, 0);
        se_strbuf_init(&ins, 0);
        se_strbuf_init(&xs, 0);
        bool rewrite[PROXY_TOP_MAX] = { false };
        for (size_t i = 0; i < n_names && r == 0; i++) {
                if (!pend->declared[i])
                        continue;
                size_t d0 = del.len, i0 = ins.len, edits = 0;
                bool ok = false;
                if (cur->declared[i])
                        r = edit(&cur->rules[i], &pend->rules[i], &del, &ins, &edits, &ok);
                if (!ok || edits * 2 > pend->rules[i].n + 1) {
                        se_strbuf_truncate(&del, d0);
                        se_strbuf_truncate(&ins, i0);
                        rewrite[i] = true;
                }
        }
        /* other chains (the services' own, deletions) pass through */
        for (const char *p = chains, *end = chains + nc; p < end;) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                int i = len > 1 ? top_index(names, n_names, p + 1, strcspn(p + 1, " \n")) : -1;
                if (i < 0 || rewrite[i])
                        se_strbuf_add(&decl, p, len + 1);
                p += len + 1;
        }
        for (const char *p = rules, *end = rules + nr; p < end;) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                bool is_add = len > 3 && memcmp(p, "-A ", 3) == 0;
                int i = is_add ? top_index(names, n_names, p + 3, strcspn(p + 3, " \n")) : -1;
                if (len > 3 && memcmp(p, "-X ", 3) == 0)
                        se_strbuf_add(&xs, p, len + 1); /* after the -D of jumps into them */
                else if (i < 0 || rewrite[i])
                        se_strbuf_add(&body, p, len + 1);
                p += len + 1;
        }
        se_strbuf_add(out, decl.buf, decl.len);
        se_strbuf_add(out, body.buf, body.len);
        se_strbuf_add(out, del.buf, del.len);
        se_strbuf_add(out, ins.buf, ins.len);
        se_strbuf_add(out, xs.buf, xs.len);
        r = r                               ?:
                    se_strbuf_failed(&decl) ?:
                    se_strbuf_failed(&body) ?:
                    se_strbuf_failed(&del)  ?:
                    se_strbuf_failed(&ins)  ?:
                    se_strbuf_failed(&xs)   ?:
                                              se_strbuf_failed(out);
        se_strbuf_release(&decl);
        se_strbuf_release(&body);
        se_strbuf_release(&del);
        se_strbuf_release(&ins);
        se_strbuf_release(&xs);
        return r;
}

/* nft verdict maps: elements one per entry ("key : verdict") from the
 * writer's "\t\t\tE,\n\t\t\tE" text. */
static int split_elems(const char *text, size_t len, struct se_strv *out)
{
        for (const char *p = text, *end = text + len; p < end;) {
                while (p < end && (*p == '\t' || *p == '\n' || *p == ','))
                        p++;
                const char *e = p;
                while (e < end && !(*e == ',' && e + 1 < end && e[1] == '\n'))
                        e++;
                if (e > p) {
                        char *s = se_strndup(p, (size_t)(e - p));
                        if (!s || se_strv_push_consume(out, s) < 0)
                                return -ENOMEM;
                }
                p = e + 1;
        }
        return 0;
}

int proxy_top_elems(struct proxy_top *top, bool partial, int idx, const char *family,
                    const char *table, const char *map, const char *text, size_t len,
                    struct se_strbuf *del, struct se_strbuf *add)
{
        struct se_strv *now = &top->pend[0].rules[idx], *old = &top->cur[0].rules[idx];
        se_strv_release(now);
        top->pend[0].declared[idx] = true;
        int r = split_elems(text, len, now);
        if (r < 0 || !partial || !top->known || !top->cur[0].declared[idx])
                return r < 0 ? r : 0;
        /* elements are unique and in a stable order: what differs lies
         * between a common head and tail, hashed alone (a large set, such
         * as hairpin-connections, mostly stays as it was) */
        size_t head = 0, tail = 0;
        while (head < now->n && head < old->n && strcmp(now->v[head], old->v[head]) == 0)
                head++;
        while (tail < now->n - head && tail < old->n - head &&
               strcmp(now->v[now->n - 1 - tail], old->v[old->n - 1 - tail]) == 0)
                tail++;
        struct se_hashmap seen = SE_HASHMAP_INIT;
        for (size_t i = head; i < now->n - tail && r == 0; i++)
                r = se_hashmap_put(&seen, now->v[i], now->v[i], NULL);
        for (size_t i = head; i < old->n - tail && r == 0; i++)
                if (!se_hashmap_get(&seen, old->v[i])) {
                        const char *colon = strstr(old->v[i], " : ");
                        int kl = colon ? (int)(colon - old->v[i]) : (int)strlen(old->v[i]);
                        se_strbuf_printf(del, "delete element %s %s %s { %.*s }\n", family, table,
                                         map, kl, old->v[i]);
                }
        se_hashmap_release(&seen);
        for (size_t i = head; i < old->n - tail && r == 0; i++)
                r = se_hashmap_put(&seen, old->v[i], old->v[i], NULL);
        for (size_t i = head; i < now->n - tail && r == 0; i++)
                if (!se_hashmap_get(&seen, now->v[i]))
                        se_strbuf_printf(add, "add element %s %s %s { %s }\n", family, table, map,
                                         now->v[i]);
        se_hashmap_release(&seen);
        return r ?: 1;
}
