/* Splitting a large iptables-restore --noflush input into several smaller
 * transactions for the nf_tables backend (iptables-nft).
 *
 * Why: iptables-nft 1.8.x, under --noflush, keeps every chain name a
 * transaction mentions (each rule's chain and jump target) in a sorted
 * linked list, inserting by a walk from its head. One transaction of C
 * chains and R rules costs O(R x C) string compares: 59 s of CPU for
 * 1,000 services x 10 endpoints here, never finishing at 10,000. Without
 * --noflush the list is skipped, but that would flush every other
 * program's rules in the table. So the chains are written in dependency
 * order (a chain after the chains it jumps to), packed into COMMIT blocks
 * whose list stays short, and within a block in descending name order, each
 * chain's declaration next to its rules, so most names land at the head
 * of the list. Each chain is still rewritten whole in one transaction;
 * chains being deleted (`-X`) and their declarations go in the last block,
 * after the chains that stopped jumping to them. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>
#include <svcenv/strbuf.h>

#include "proxy_internal.h"

/* a table section is split only past this many lines */
#define SPLIT_MIN_LINES 20000u
/* lines of one block, and its estimated compares (lines x jump targets) */
#define BLOCK_MAX_LINES 30000u
#define BLOCK_BUDGET    2000000u
#define DEPTH_MAX       64

struct line {
        const char *p;
        size_t n; /* without the newline */
};

struct chain {
        char *name;
        uint32_t decl; /* line index + 1, 0: not declared */
        uint32_t first, last; /* rule list (rule indices + 1) */
        uint32_t depth;
        uint32_t stamp; /* block that last counted it as a jump target */
        bool deleted; /* has an -X line */
};

struct rule {
        uint32_t line;
        uint32_t chain;
        uint32_t target; /* chain index + 1, 0: none of ours */
        uint32_t next; /* next rule of the chain + 1 */
};

struct section {
        struct line *lines;
        size_t n_lines, cap_lines;
        struct chain *chains;
        size_t n_chains, cap_chains;
        struct rule *rules;
        size_t n_rules, cap_rules;
        struct se_hashmap by_name; /* name -> chain index + 1 */
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
        if (need <= *cap)
                return 0;
        size_t c = *cap ? *cap * 2 : 256;
        while (c < need)
                c *= 2;
        void *q = se_reallocarray(*p, c, size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *cap = c;
        return 0;
}

static void section_reset(struct section *s)
{
        for (size_t i = 0; i < s->n_chains; i++)
                free(s->chains[i].name);
        se_hashmap_release(&s->by_name);
        s->by_name = (struct se_hashmap)SE_HASHMAP_INIT;
        s->n_lines = s->n_chains = s->n_rules = 0;
}

static void section_release(struct section *s)
{
        section_reset(s);
        free(s->lines);
        free(s->chains);
        free(s->rules);
}

/* The next token of a rule line from *at (double quotes group, backslash
 * escapes inside them); *len 0 at the end. */
static const char *token(const struct line *l, size_t *at, size_t *len)
{
        size_t i = *at;
        while (i < l->n && l->p[i] == ' ')
                i++;
        size_t start = i;
        bool quoted = false;
        for (; i < l->n && (quoted || l->p[i] != ' '); i++) {
                if (quoted && l->p[i] == '\\' && i + 1 < l->n)
                        i++;
                else if (l->p[i] == '"')
                        quoted = !quoted;
        }
        *len = i - start;
        *at = i;
        return l->p + start;
}

/* Chain index + 1 of name (n bytes), adding it when add; 0 when absent,
 * -ENOMEM. */
static long chain_of(struct section *s, const char *name, size_t n, bool add)
{
        char key[64];
        if (n == 0 || n >= sizeof(key))
                return 0; /* not a chain name iptables accepts: never ours */
        memcpy(key, name, n);
        key[n] = 0;
        void *v = se_hashmap_get(&s->by_name, key);
        if (v || !add)
                return (long)(uintptr_t)v;
        if (grow((void **)&s->chains, &s->cap_chains, s->n_chains + 1, sizeof(*s->chains)) < 0)
                return -ENOMEM;
        struct chain *c = &s->chains[s->n_chains];
        *c = (struct chain){ .name = se_strdup(key) };
        if (!c->name)
                return -ENOMEM;
        s->n_chains++;
        if (se_hashmap_put(&s->by_name, c->name, (void *)(uintptr_t)s->n_chains, NULL) < 0)
                return -ENOMEM;
        return (long)s->n_chains;
}

/* Indexes the section's lines: 1 when it can be split, 0 when it holds
 * anything but `:` declarations, `-A` rules and `-X` deletions (written
 * as it came), -ENOMEM. */
static int index_section(struct section *s)
{
        for (size_t i = 0; i < s->n_lines; i++) {
                const struct line *l = &s->lines[i];
                size_t at = 0, n;
                const char *t;
                long c;
                if (l->n > 0 && l->p[0] == ':') {
                        at = 1;
                        t = token(l, &at, &n);
                        if ((c = chain_of(s, t, n, true)) <= 0 || s->chains[c - 1].decl)
                                return c < 0 ? (int)c : 0;
                        s->chains[c - 1].decl = (uint32_t)i + 1;
                        continue;
                }
                t = token(l, &at, &n);
                bool append = n == 2 && !memcmp(t, "-A", 2);
                if (!append && !(n == 2 && !memcmp(t, "-X", 2)))
                        return 0;
                t = token(l, &at, &n);
                if ((c = chain_of(s, t, n, true)) <= 0)
                        return c < 0 ? (int)c : 0;
                if (!append) {
                        s->chains[c - 1].deleted = true;
                        continue;
                }
                if (grow((void **)&s->rules, &s->cap_rules, s->n_rules + 1, sizeof(*s->rules)) < 0)
                        return -ENOMEM;
                struct rule *r = &s->rules[s->n_rules];
                *r = (struct rule){ .line = (uint32_t)i, .chain = (uint32_t)c - 1 };
                while ((t = token(l, &at, &n)), n > 0) {
                        bool jump = (n == 2 && (!memcmp(t, "-j", 2) || !memcmp(t, "-g", 2))) ||
                                    (n == 6 && !memcmp(t, "--jump", 6)) ||
                                    (n == 6 && !memcmp(t, "--goto", 6));
                        if (!jump)
                                continue;
                        t = token(l, &at, &n);
                        long tc = chain_of(s, t, n, false);
                        if (tc > 0 && tc != c)
                                r->target = (uint32_t)tc;
                        break;
                }
                struct chain *ch = &s->chains[c - 1];
                if (ch->last)
                        s->rules[ch->last - 1].next = (uint32_t)s->n_rules + 1;
                else
                        ch->first = (uint32_t)s->n_rules + 1;
                ch->last = (uint32_t)s->n_rules + 1;
                s->n_rules++;
        }
        return 1;
}

/* depth: 0 for a chain jumping to none of ours, else 1 + its targets'
 * deepest. false on a loop (or deeper than DEPTH_MAX). */
static bool set_depths(struct section *s)
{
        for (unsigned pass = 0; pass <= DEPTH_MAX; pass++) {
                bool changed = false;
                for (size_t i = 0; i < s->n_rules; i++) {
                        const struct rule *r = &s->rules[i];
                        if (!r->target)
                                continue;
                        uint32_t d = s->chains[r->target - 1].depth + 1;
                        if (d > s->chains[r->chain].depth) {
                                s->chains[r->chain].depth = d;
                                changed = true;
                        }
                }
                if (!changed)
                        return true;
        }
        return false;
}

/* shallower first; among equals, names descending */
static int by_depth_name_desc(const void *a, const void *b, void *chains)
{
        const struct chain *x = (const struct chain *)chains + *(const uint32_t *)a;
        const struct chain *y = (const struct chain *)chains + *(const uint32_t *)b;
        if (x->depth != y->depth)
                return x->depth < y->depth ? -1 : 1;
        return -strcmp(x->name, y->name);
}

static void put_line(struct se_strbuf *out, const struct line *l)
{
        se_strbuf_add(out, l->p, l->n);
        se_strbuf_putc(out, '\n');
}

static void put_chain(struct se_strbuf *out, const struct section *s, const struct chain *c)
{
        if (c->decl)
                put_line(out, &s->lines[c->decl - 1]);
        for (uint32_t r = c->first; r; r = s->rules[r - 1].next)
                put_line(out, &s->lines[s->rules[r - 1].line]);
}

static size_t chain_lines(const struct section *s, const struct chain *c)
{
        size_t n = c->decl ? 1 : 0;
        for (uint32_t r = c->first; r; r = s->rules[r - 1].next)
                n++;
        return n;
}

/* jump targets of c not yet counted in block */
static size_t new_targets(struct section *s, const struct chain *c, uint32_t block)
{
        size_t n = 0;
        for (uint32_t r = c->first; r; r = s->rules[r - 1].next) {
                uint32_t t = s->rules[r - 1].target;
                if (t && s->chains[t - 1].stamp != block) {
                        s->chains[t - 1].stamp = block;
                        n++;
                }
        }
        return n;
}

static int write_split(struct section *s, const struct line *head, struct se_strbuf *out)
{
        uint32_t *order = se_reallocarray(NULL, s->n_chains ? s->n_chains : 1, sizeof(*order));
        size_t n_order = 0;
        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_chains; i++)
                if (!s->chains[i].deleted)
                        order[n_order++] = (uint32_t)i;
        qsort_r(order, n_order, sizeof(*order), by_depth_name_desc, s->chains);

        uint32_t block = 1;
        size_t lines = 0, targets = 0;
        put_line(out, head);
        for (size_t k = 0; k < n_order; k++) {
                struct chain *c = &s->chains[order[k]];
                size_t add = chain_lines(s, c);
                size_t t = new_targets(s, c, block);
                if (lines > 0 && (lines + add > BLOCK_MAX_LINES ||
                                  (lines + add) * (targets + t) > BLOCK_BUDGET)) {
                        se_strbuf_puts(out, "COMMIT\n");
                        put_line(out, head);
                        block++;
                        lines = 0;
                        t = new_targets(s, c, block);
                        targets = 0;
                }
                put_chain(out, s, c);
                lines += add;
                targets += t;
        }
        /* chains being deleted: declared (flushed) and removed last, in the
         * order the input had them */
        for (size_t i = 0; i < s->n_chains; i++)
                if (s->chains[i].deleted)
                        put_chain(out, s, &s->chains[i]);
        for (size_t i = 0; i < s->n_lines; i++)
                if (s->lines[i].n > 2 && !memcmp(s->lines[i].p, "-X", 2))
                        put_line(out, &s->lines[i]);
        se_strbuf_puts(out, "COMMIT\n");
        free(order);
        return 0;
}

static int flush_section(struct section *s, const struct line *head, struct se_strbuf *out)
{
        int r = 1;
        if (s->n_lines >= SPLIT_MIN_LINES) {
                r = index_section(s);
                if (r > 0 && set_depths(s))
                        r = write_split(s, head, out);
                else if (r >= 0)
                        r = 1;
        }
        if (r == 1) { /* as it came */
                put_line(out, head);
                for (size_t i = 0; i < s->n_lines; i++)
                        put_line(out, &s->lines[i]);
                se_strbuf_puts(out, "COMMIT\n");
                r = 0;
        }
        section_reset(s);
        return r;
}

int proxy_restore_split(const char *in, size_t n, struct se_strbuf *out)
{
        struct section s = { .by_name = SE_HASHMAP_INIT };
        struct line head = { 0 };
        bool in_table = false;
        int r = 0;
        for (size_t at = 0; at < n && r == 0;) {
                const char *nl = memchr(in + at, '\n', n - at);
                struct line l = { in + at, nl ? (size_t)(nl - (in + at)) : n - at };
                at += l.n + (nl != NULL);
                if (!in_table && l.n > 0 && l.p[0] == '*') {
                        head = l;
                        in_table = true;
                } else if (in_table && l.n == 6 && !memcmp(l.p, "COMMIT", 6)) {
                        r = flush_section(&s, &head, out);
                        in_table = false;
                } else if (in_table) {
                        if (grow((void **)&s.lines, &s.cap_lines, s.n_lines + 1, sizeof(*s.lines)) <
                            0)
                                r = -ENOMEM;
                        else
                                s.lines[s.n_lines++] = l;
                } else {
                        put_line(out, &l);
                }
        }
        if (r == 0 && in_table) { /* no COMMIT: let iptables-restore say so */
                put_line(out, &head);
                for (size_t i = 0; i < s.n_lines; i++)
                        put_line(out, &s.lines[i]);
        }
        section_release(&s);
        return r < 0 ? r : se_strbuf_failed(out);
}
