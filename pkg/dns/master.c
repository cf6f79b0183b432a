/* master.c — the zone as an RFC 1035 master file (`svcenv dns --zone`). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/strbuf.h>

#include "dns_internal.h"

static const char *type_name(uint16_t t)
{
        switch (t) {
        case DNS_T_A:
                return "A";
        case DNS_T_AAAA:
                return "AAAA";
        case DNS_T_CNAME:
                return "CNAME";
        case DNS_T_PTR:
                return "PTR";
        case DNS_T_SRV:
                return "SRV";
        case DNS_T_TXT:
                return "TXT";
        case DNS_T_SOA:
                return "SOA";
        default:
                return "TYPE0";
        }
}

static void put_target(struct se_strbuf *sb, const uint8_t *name)
{
        char text[1024];
        if (dns_name_text(name, dns_wire_len(name), text, sizeof(text)) >= 0) {
                se_strbuf_puts(sb, text);
                se_strbuf_putc(sb, '.');
        }
}

/* The owner as written, without the final dot: a port name's key has no
 * underscores (CoreDNS takes both spellings), the file has the spec's
 * `_port._proto`. */
static void owner_text(const struct dns_node *n, char *out, size_t cap)
{
        const char *dot = strchr(n->key, '.');
        if (n->kind == DNS_NODE_PORT && dot)
                snprintf(out, cap, "_%.*s._%s", (int)(dot - n->key), n->key, dot + 1);
        else
                snprintf(out, cap, "%s", n->key);
}

static void put_owner(struct se_strbuf *sb, const struct dns_node *n)
{
        char text[1100];
        owner_text(n, text, sizeof(text));
        se_strbuf_puts(sb, text);
        se_strbuf_putc(sb, '.');
}

static void put_rr(struct se_strbuf *sb, const struct dns_node *n, const struct dns_rr *rr,
                   bool why)
{
        char addr[INET6_ADDRSTRLEN];
        put_owner(sb, n);
        se_strbuf_printf(sb, "\t%u\tIN\t%s\t", rr->ttl, type_name(rr->type));
        switch (rr->type) {
        case DNS_T_A:
        case DNS_T_AAAA:
                inet_ntop(rr->type == DNS_T_A ? AF_INET : AF_INET6, rr->fixed, addr, sizeof(addr));
                se_strbuf_puts(sb, addr);
                break;
        case DNS_T_TXT:
                se_strbuf_printf(sb, "\"%.*s\"", rr->fixed[0], (const char *)rr->fixed + 1);
                break;
        case DNS_T_SRV:
                se_strbuf_printf(sb, "%u %u %u ", dns_get16(rr->fixed), dns_get16(rr->fixed + 2),
                                 dns_get16(rr->fixed + 4));
                put_target(sb, rr->name);
                break;
        default:
                put_target(sb, rr->name);
                break;
        }
        if (why && rr->why)
                se_strbuf_printf(sb, "\t; %s", rr->why);
        se_strbuf_putc(sb, '\n');
}

/* The cluster zone, then in-addr.arpa, then ip6.arpa. */
static int zone_of(const char *key)
{
        size_t n = strlen(key);
        if (n >= 12 && strcmp(key + n - 12, "in-addr.arpa") == 0)
                return 1;
        if (n >= 8 && strcmp(key + n - 8, "ip6.arpa") == 0)
                return 2;
        return 0;
}

/* RFC 4034 6.1 canonical order: labels compared from the right, each as
 * bytes, a name before the names below it. */
static int canonical_cmp(const char *a, const char *b)
{
        size_t ea = strlen(a), eb = strlen(b);
        for (;;) {
                if (ea == 0 || eb == 0)
                        return (ea != 0) - (eb != 0);
                size_t sa = ea, sb = eb;
                while (sa > 0 && a[sa - 1] != '.')
                        sa--;
                while (sb > 0 && b[sb - 1] != '.')
                        sb--;
                size_t la = ea - sa, lb = eb - sb;
                int c = memcmp(a + sa, b + sb, la < lb ? la : lb);
                if (c || la != lb)
                        return c ? c : (la < lb ? -1 : 1);
                ea = sa ? sa - 1 : 0;
                eb = sb ? sb - 1 : 0;
                if ((sa == 0) != (sb == 0))
                        return sa == 0 ? -1 : 1;
                if (sa == 0)
                        return 0;
        }
}

static int cmp_node(const void *a, const void *b)
{
        const struct dns_node *x = *(const struct dns_node *const *)a;
        const struct dns_node *y = *(const struct dns_node *const *)b;
        int zx = zone_of(x->key), zy = zone_of(y->key);
        if (zx != zy)
                return zx - zy;
        char tx[1100], ty[1100];
        owner_text(x, tx, sizeof(tx));
        owner_text(y, ty, sizeof(ty));
        return canonical_cmp(tx, ty);
}

static const uint16_t type_order[] = { DNS_T_SOA, DNS_T_A,   DNS_T_AAAA, DNS_T_CNAME,
                                       DNS_T_PTR, DNS_T_SRV, DNS_T_TXT };

static void put_soa(struct se_strbuf *sb, const char *apex, const struct se_dns_zone *z)
{
        se_strbuf_printf(sb, "%s.\t%u\tIN\tSOA\tns.dns.%s. hostmaster.%s. %u 7200 1800 86400 %u\n",
                         apex, z->ttl < 300 ? z->ttl : 300, apex, apex, z->serial, z->ttl);
}

static int master(const struct se_dns_zone *z, bool why, char **ret)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        const struct dns_node **v = NULL;
        size_t n_nodes = 0;
        struct dns_scratch *sc = se_calloc(1, sizeof(*sc));
        if (!sc)
                return -ENOMEM;
        sc->why = why;
        if (dns_zone_nodes(z, sc, &v, &n_nodes) < 0) {
                dns_scratch_release(sc);
                free(sc);
                return -ENOMEM;
        }
        qsort(v, n_nodes, sizeof(*v), cmp_node);
        static const char *const apex[] = { NULL, "in-addr.arpa", "ip6.arpa" };
        int group = -1;
        for (size_t i = 0; i <= n_nodes; i++) {
                int g = i < n_nodes ? zone_of(v[i]->key) : 3;
                while (group < g && group < 2) /* each zone's SOA opens it */
                        if (++group < 3)
                                put_soa(&sb, apex[group] ? apex[group] : z->zone, z);
                if (i == n_nodes)
                        break;
                for (size_t t = 0; t < SE_ARRAY_SIZE(type_order); t++)
                        for (uint32_t k = 0; k < v[i]->rrs.n; k++)
                                if (v[i]->rrs.v[k].type == type_order[t])
                                        put_rr(&sb, v[i], &v[i]->rrs.v[k], why);
        }
        free(v);
        dns_scratch_release(sc);
        free(sc);
        if (se_strbuf_failed(&sb)) {
                se_strbuf_release(&sb);
                return -ENOMEM;
        }
        *ret = se_strbuf_detach(&sb, NULL);
        return *ret ? 0 : -ENOMEM;
}

int se_dns_zone_master(const struct se_dns_zone *z, char **ret)
{
        return master(z, false, ret);
}

int se_dns_zone_explain(const struct se_dns_zone *z, char **ret)
{
        return master(z, true, ret);
}

/* name, lower case, without a final dot, into out; false when too long. */
static bool lower_name(const char *name, char *out, size_t cap)
{
        size_t n = strlen(name);
        if (n > 0 && name[n - 1] == '.')
                n--;
        if (n >= cap)
                return false;
        for (size_t i = 0; i < n; i++)
                out[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
        out[n] = '\0';
        return true;
}

/* The node whose owner is want: found as the answer path finds a name, not
 * by listing the zone. The spec's `_port._proto` owner is keyed without
 * the underscores. NULL: none (or no memory for a name written from a
 * table, which reads as none). */
static const struct dns_node *find_owner(const struct se_dns_zone *z, const char *want,
                                         struct dns_scratch *sc)
{
        const struct dns_node *n = dns_zone_find(z, want, sc);
        if (n && strcmp(n->key, want) == 0)
                return n;
        const char *dot = strchr(want, '.');
        if (want[0] != '_' || !dot || dot[1] != '_')
                return NULL;
        char key[1100];
        snprintf(key, sizeof(key), "%.*s.%s", (int)(dot - want - 1), want + 1, dot + 2);
        n = dns_zone_find(z, key, sc);
        return n && n->kind == DNS_NODE_PORT && strcmp(n->key, key) == 0 ? n : NULL;
}

int se_dns_name_explain(const struct se_dns_zone *z, const char *name, char **ret)
{
        char want[1100];
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        if (!lower_name(name, want, sizeof(want))) {
                *ret = se_strdup("");
                return *ret ? 0 : -ENOMEM;
        }
        struct dns_scratch *sc = se_calloc(1, sizeof(*sc));
        if (!sc)
                return -ENOMEM;
        sc->why = true;
        if (strcmp(want, z->zone) == 0 || strcmp(want, "in-addr.arpa") == 0 ||
            strcmp(want, "ip6.arpa") == 0)
                put_soa(&sb, want, z);
        const struct dns_node *n = find_owner(z, want, sc);
        for (size_t t = 0; n && t < SE_ARRAY_SIZE(type_order); t++)
                for (uint32_t k = 0; k < n->rrs.n; k++)
                        if (n->rrs.v[k].type == type_order[t])
                                put_rr(&sb, n, &n->rrs.v[k], true);
        dns_scratch_release(sc);
        free(sc);
        if (se_strbuf_failed(&sb)) {
                se_strbuf_release(&sb);
                return -ENOMEM;
        }
        *ret = se_strbuf_detach(&sb, NULL);
        if (!*ret)
                *ret = se_strdup(""); /* nothing appended: an empty string */
        return *ret ? 0 : -ENOMEM;
}
