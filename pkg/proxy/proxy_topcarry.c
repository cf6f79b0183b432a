/* Carried iptables syncs that add, remove or change a service's top-level
 * rules (KUBE-SERVICES, KUBE-NODEPORTS, ... of nat and filter): the
 * service's run of rules in each such chain is replaced by single-rule
 * edits (`-D CHAIN <rule>`, `-I CHAIN <pos> <rule>`) against what the last
 * applied sync left (proxy_top.cur), without building the whole table.
 *
 * A full sync writes the services in spn order, each one's rules together,
 * and every rule of a service in a top-level chain carries a comment that
 * starts with its spn ("ns/name:port cluster IP", "ns/name:port has no
 * endpoints", ...): a chain's rules are sorted by that first word, and a
 * service's run is found by binary search. The other rules (the NodePorts
 * jump that ends nat KUBE-SERVICES, the fixed rules of KUBE-FORWARD, ...)
 * sort last. The edits are recorded and made to cur only once applied. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>

#include "proxy_internal.h"

/* The first word of a top-level rule's comment (no quote): the spn of the
 * service it is for. NULL (sorts last) for a rule of no service. */
static const char *rule_key(const char *line, size_t *len)
{
        static const char comment[] = " -m comment --comment ";
        static const char nodeports[] = "\"kubernetes service nodeports;";
        const char *p = strchr(line + 3, ' '); /* after "-A CHAIN" */
        if (!p || strncmp(p, comment, sizeof(comment) - 1) != 0)
                return NULL;
        p += sizeof(comment) - 1;
        if (strncmp(p, nodeports, sizeof(nodeports) - 1) == 0)
                return NULL;
        p += *p == '"';
        *len = strcspn(p, " \"");
        return p;
}

/* key (NULL: last) against spn */
static int key_cmp(const char *key, size_t len, const char *spn)
{
        if (!key)
                return 1;
        size_t sl = strlen(spn);
        int c = memcmp(key, spn, len < sl ? len : sl);
        return c ? c : (len > sl) - (len < sl);
}

/* The first rule of rules whose key is at least (strict: greater than) spn. */
static size_t bound(const struct se_strv *rules, const char *spn, bool strict)
{
        size_t lo = 0, hi = rules->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2, len = 0;
                const char *key = rule_key(rules->v[mid], &len);
                int c = key_cmp(key, len, spn);
                if (c < 0 || (strict && c == 0))
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* "-A CHAIN" of line is name */
static bool in_chain(const char *line, size_t len, const char *name)
{
        size_t nl = strlen(name);
        return len > 3 + nl && memcmp(line, "-A ", 3) == 0 && memcmp(line + 3, name, nl) == 0 &&
               line[3 + nl] == ' ';
}

/* Where the edits recorded so far have moved chain (table, chain)'s rules
 * from old index at on. */
static ptrdiff_t shift_of(const struct proxy_top *top, int table, int chain)
{
        ptrdiff_t s = 0;
        for (size_t i = 0; i < top->n_ops; i++) {
                const struct proxy_top_op *op = &top->ops[i];
                if (op->table == table && op->chain == chain)
                        s += (ptrdiff_t)op->ins.n - (ptrdiff_t)op->del;
        }
        return s;
}

static int record(struct proxy_top *top, struct proxy_top_op *op)
{
        if (top->n_ops == top->cap_ops) {
                size_t cap = top->cap_ops ? 2 * top->cap_ops : 16;
                struct proxy_top_op *v = se_reallocarray(top->ops, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                top->ops = v;
                top->cap_ops = cap;
        }
        top->ops[top->n_ops++] = *op;
        return 0;
}

int proxy_top_carry_port(struct proxy_top *top, int table, const char *const *names, size_t n_names,
                         const char *spn, const char *rules, size_t nr, struct se_strbuf *out)
{
        const struct proxy_top_table *cur = &top->cur[table];
        int r = 0;
        if (!top->known || n_names > PROXY_TOP_MAX)
                return -EAGAIN;
        for (size_t i = 0; i < n_names && r == 0; i++) {
                struct proxy_top_op op = { .table = table, .chain = (int)i, .ins = SE_STRV_INIT };
                for (const char *p = rules, *end = rules + nr; p < end && r == 0;) {
                        const char *nl = memchr(p, '\n', (size_t)(end - p));
                        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                        if (in_chain(p, len, names[i])) {
                                char *line = se_strndup(p, len);
                                r = line ? se_strv_push_consume(&op.ins, line) : -ENOMEM;
                        }
                        p += len + 1;
                }
                const struct se_strv *old = &cur->rules[i];
                size_t a = r == 0 ? bound(old, spn, false) : 0;
                size_t b = r == 0 ? bound(old, spn, true) : 0;
                bool same = b - a == op.ins.n;
                for (size_t k = 0; same && k < op.ins.n; k++)
                        same = strcmp(old->v[a + k], op.ins.v[k]) == 0;
                if (r < 0 || same) {
                        se_strv_release(&op.ins);
                        continue;
                }
                if (!cur->declared[i]) { /* not known from the last sync */
                        se_strv_release(&op.ins);
                        r = -EAGAIN;
                        break;
                }
                size_t at = (size_t)((ptrdiff_t)a + shift_of(top, table, (int)i));
                for (size_t k = a; k < b; k++)
                        se_strbuf_printf(out, "-D%s\n", old->v[k] + 2);
                size_t cl = strlen(names[i]);
                for (size_t k = 0; k < op.ins.n; k++)
                        se_strbuf_printf(out, "-I %s %zu%s\n", names[i], at + k + 1,
                                         op.ins.v[k] + 3 + cl);
                op.at = a;
                op.del = b - a;
                if ((r = se_strbuf_failed(out) ?: record(top, &op)) < 0)
                        se_strv_release(&op.ins);
        }
        return r;
}

void proxy_top_carry_done(struct proxy_top *top, bool applied)
{
        /* last first: each op's old indices stay valid for those before */
        for (size_t i = top->n_ops; i-- > 0;) {
                struct proxy_top_op *op = &top->ops[i];
                struct se_strv *rules = &top->cur[op->table].rules[op->chain];
                if (applied) {
                        size_t grow = op->ins.n > op->del ? op->ins.n - op->del : 0;
                        if (rules->n + grow + 1 > rules->alloc) {
                                size_t cap = rules->n + grow + 1 + rules->n / 2;
                                char **v = se_reallocarray(rules->v, cap, sizeof(*v));
                                if (!v) { /* not what the kernel has: not known */
                                        top->known = false;
                                        applied = false;
                                        se_strv_release(&op->ins);
                                        continue;
                                }
                                rules->v = v;
                                rules->alloc = cap;
                        }
                        for (size_t k = 0; k < op->del; k++)
                                free(rules->v[op->at + k]);
                        memmove(&rules->v[op->at + op->ins.n], &rules->v[op->at + op->del],
                                (rules->n - op->at - op->del) * sizeof(*rules->v));
                        for (size_t k = 0; k < op->ins.n; k++)
                                rules->v[op->at + k] = op->ins.v[k]; /* taken over */
                        rules->n = rules->n - op->del + op->ins.n;
                        rules->v[rules->n] = NULL;
                        free(op->ins.v);
                        op->ins = (struct se_strv)SE_STRV_INIT;
                } else {
                        se_strv_release(&op->ins);
                }
        }
        free(top->ops);
        top->ops = NULL;
        top->n_ops = top->cap_ops = 0;
}
