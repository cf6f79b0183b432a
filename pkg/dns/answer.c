/* answer.c — one query in, one response out, from a zone snapshot. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dns_internal.h"

#define KEY_MAX 1024

enum outcome { ANSWER, NODATA, NXDOMAIN, REFUSED, FORWARD };

struct reply {
        const struct se_dns_zone *z;
        const struct dns_query *q;
        struct dns_writer w;
        unsigned counts[3];
        bool tc, full;
        bool reverse; /* the SOA of in-addr.arpa / ip6.arpa, not the cluster's */
        size_t apex_label; /* where the zone's labels start in q->qname */
        const struct dns_rr_set *last_add; /* additionals already written */
        struct dns_scratch *scratch; /* names written from tables */
};

/* ---- what the question asks ---- */

/* Number of labels of a wire name. */
static size_t n_labels(const uint8_t *w)
{
        size_t n = 0;
        for (; *w; w += 1 + *w)
                n++;
        return n;
}

/* Offset in the wire name of its label number i. */
static size_t label_at(const uint8_t *w, size_t i)
{
        size_t off = 0;
        while (i-- > 0 && w[off])
                off += 1 + (size_t)w[off];
        return off;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
        size_t m = strlen(suffix);
        return n == m ? memcmp(s, suffix, n) == 0 :
                        n > m && s[n - m - 1] == '.' && memcmp(s + n - m, suffix, m) == 0;
}

/* `_http._tcp.<svc>.<ns>.svc.<zone>` and `http.tcp.…` are the same name to
 * CoreDNS: the zone's keys have no underscores. Only a name with exactly
 * port, protocol, service, namespace and "svc" left of the zone is one. */
static void drop_port_underscores(char *key, size_t rel_labels)
{
        if (rel_labels != 5)
                return;
        char *dst = key;
        const char *src = key;
        for (int i = 0; i < 2; i++) {
                if (*src == '_')
                        src++;
                while (*src && *src != '.')
                        *dst++ = *src++;
                if (*src)
                        *dst++ = *src++;
        }
        memmove(dst, src, strlen(src) + 1);
}

/* ---- writing ---- */

/* An SRV target (and the owner of its addresses in the additional
 * section) with the zone part as the query spells it: CoreDNS writes the
 * target from the zone cut out of the query name. Every SRV target is in
 * the cluster zone; buf holds SE_DNS_MAX_NAME bytes. */
static const uint8_t *srv_target(const struct reply *r, const uint8_t *name, uint8_t *buf)
{
        size_t len = dns_wire_len(name), zlen = r->z->zone_wire_len;
        if (r->reverse || len < zlen)
                return name;
        memcpy(buf, name, len - zlen);
        memcpy(buf + len - zlen, r->q->qname + r->apex_label, zlen);
        return buf;
}

static int put_rr(struct reply *r, const uint8_t *owner, const struct dns_rr *rr)
{
        struct dns_writer *w = &r->w;
        size_t start = w->len;
        unsigned n_ptrs = w->n_ptrs;
        uint8_t fix[10];
        dns_put16(fix, rr->type);
        dns_put16(fix + 2, 1);
        dns_put32(fix + 4, rr->ttl);
        if (dns_put_name(w, owner, true) < 0 || dns_put_bytes(w, fix, 10) < 0)
                goto full;
        size_t rd = w->len;
        if (dns_put_bytes(w, rr->fixed, rr->n_fixed) < 0)
                goto full;
        /* RFC 2782: no compression in an SRV target */
        uint8_t cased[SE_DNS_MAX_NAME];
        if (rr->type == DNS_T_SRV) { /* RFC 2782: no compression of the target */
                if (dns_put_name(w, srv_target(r, rr->name, cased), false) < 0)
                        goto full;
        } else if (rr->name && dns_put_name(w, rr->name, true) < 0) {
                goto full;
        }
        dns_put16(w->buf + rd - 2, (uint16_t)(w->len - rd));
        return 0;
full:
        w->len = start;
        w->n_ptrs = n_ptrs;
        return -ENOSPC;
}

/* Appends a record to a section; once one does not fit, the section and
 * those after it stay as they are (no half records, no records out of
 * order), and TC says so whichever section lost it: miekg/dns's Truncate
 * under CoreDNS sets TC for a cut additional section too. */
static void emit(struct reply *r, unsigned section, const uint8_t *owner, const struct dns_rr *rr)
{
        if (r->full)
                return;
        if (put_rr(r, owner, rr) < 0) {
                (void)section;
                r->full = r->tc = true;
                return;
        }
        r->counts[section]++;
}

static void emit_set(struct reply *r, const uint8_t *owner, const struct dns_rr_set *s,
                     uint16_t type)
{
        for (uint32_t i = 0; i < s->n; i++)
                if (s->v[i].type == type)
                        emit(r, 0, owner, &s->v[i]);
}

static void emit_soa(struct reply *r, unsigned section)
{
        const struct dns_query *q = r->q;
        const struct se_dns_zone *z = r->z;
        uint8_t mname[SE_DNS_MAX_NAME], rname[SE_DNS_MAX_NAME], tail[20];
        const uint8_t *apex = q->qname + r->apex_label;
        size_t alen = dns_wire_len(apex);
        /* ns.dns.<apex> and hostmaster.<apex> with the apex as the query
         * spells it: CoreDNS builds the SOA from the zone cut out of the
         * query name */
        if (alen + 11 > SE_DNS_MAX_NAME)
                return;
        memcpy(mname,
               "\x02"
               "ns"
               "\x03"
               "dns",
               7);
        memcpy(mname + 7, apex, alen);
        memcpy(rname,
               "\x0a"
               "hostmaster",
               11);
        memcpy(rname + 11, apex, alen);
        dns_put32(tail, z->serial);
        dns_put32(tail + 4, 7200);
        dns_put32(tail + 8, 1800);
        dns_put32(tail + 12, 86400);
        dns_put32(tail + 16, z->ttl);
        struct dns_writer *w = &r->w;
        size_t start = w->len;
        unsigned n_ptrs = w->n_ptrs;
        uint8_t fix[10];
        dns_put16(fix, DNS_T_SOA);
        dns_put16(fix + 2, 1);
        dns_put32(fix + 4, z->ttl < 300 ? z->ttl : 300);
        if (r->full || dns_put_name(w, apex, true) < 0 || dns_put_bytes(w, fix, 10) < 0)
                goto full;
        size_t rd = w->len;
        if (dns_put_name(w, mname, true) < 0 || dns_put_name(w, rname, true) < 0 ||
            dns_put_bytes(w, tail, 20) < 0)
                goto full;
        dns_put16(w->buf + rd - 2, (uint16_t)(w->len - rd));
        r->counts[section]++;
        return;
full:
        w->len = start;
        w->n_ptrs = n_ptrs;
        r->full = r->tc = true;
}

static void emit_additional(struct reply *r, const struct dns_rr_set *answered)
{
        for (uint32_t i = 0; i < answered->n; i++) {
                const struct dns_rr *rr = &answered->v[i];
                if (rr->type != DNS_T_SRV || !rr->add || rr->add == r->last_add)
                        continue;
                r->last_add = rr->add;
                uint8_t cased[SE_DNS_MAX_NAME];
                const uint8_t *owner = srv_target(r, rr->name, cased);
                for (uint32_t k = 0; k < rr->add->n; k++)
                        if (rr->add->v[k].type == DNS_T_A || rr->add->v[k].type == DNS_T_AAAA)
                                emit(r, 2, owner, &rr->add->v[k]);
        }
}

/* ---- deciding ---- */

static bool has_type(const struct dns_node *n, uint16_t type)
{
        for (uint32_t i = 0; i < n->rrs.n; i++)
                if (n->rrs.v[i].type == type)
                        return true;
        return false;
}

/* An ExternalName answer: the CNAME chain while it stays in the zone, then
 * the records of the type asked at its end. An in-zone end without them is
 * NODATA without the CNAME (as CoreDNS); an end outside the zone gives the
 * CNAMEs alone (resolving it is the forwarder's job). */
static enum outcome external(struct reply *r, const struct dns_node *n)
{
        const struct dns_node *chain[DNS_MAX_CHASE + 1];
        size_t len = 0;
        uint16_t t = r->q->qtype;
        if (t == DNS_T_CNAME) {
                emit_set(r, r->q->qname, &n->rrs, DNS_T_CNAME);
                return ANSWER;
        }
        if (t != DNS_T_A && t != DNS_T_AAAA)
                return NODATA;
        chain[len++] = n;
        const struct dns_node *end = NULL;
        while (len <= DNS_MAX_CHASE) {
                const char *target = chain[len - 1]->target;
                if (!ends_with(target, strlen(target), r->z->zone))
                        break; /* leaves the zone */
                end = dns_zone_find(r->z, target, r->scratch);
                if (!end || end->kind != DNS_NODE_EXTERNAL)
                        break;
                for (size_t i = 0; i < len; i++)
                        if (chain[i] == end)
                                return NODATA; /* a loop never ends in an address */
                chain[len++] = end;
                end = NULL;
        }
        const char *last = chain[len - 1]->target;
        bool in_zone = ends_with(last, strlen(last), r->z->zone);
        if (len > DNS_MAX_CHASE || (in_zone && (!end || !has_type(end, t))))
                return NODATA;
        const uint8_t *owner = r->q->qname;
        for (size_t i = 0; i < len; i++) {
                const struct dns_rr *cname = &chain[i]->rrs.v[0];
                emit(r, 0, owner, cname);
                owner = cname->name;
        }
        if (in_zone)
                emit_set(r, owner, &end->rrs, t);
        return ANSWER;
}

/* `a-b-c-d.<ns>.pod.<zone>` under `pods insecure`: any address in an
 * existing namespace. key is already cut to those three labels. */
static enum outcome insecure_pod(struct reply *r, const char *key, size_t rel_labels)
{
        if (rel_labels != 3)
                return NXDOMAIN;
        char buf[KEY_MAX];
        snprintf(buf, sizeof(buf), "%s", key);
        char *labels[3], *save = NULL;
        size_t n = 0;
        for (char *l = strtok_r(buf, ".", &save); l && n < 3; l = strtok_r(NULL, ".", &save))
                labels[n++] = l;
        if (n < 3 || strcmp(labels[2], "pod") != 0)
                return NXDOMAIN;
        char *dashed = labels[0], *ns = labels[1];
        char nskey[KEY_MAX];
        snprintf(nskey, sizeof(nskey), "%s.svc.%s", ns, r->z->zone);
        const struct dns_node *nsn = dns_zone_find(r->z, nskey, r->scratch);
        if (!nsn || nsn->kind != DNS_NODE_NAMESPACE)
                return NXDOMAIN;
        size_t dashes = 0;
        for (char *p = dashed; *p; p++)
                dashes += *p == '-';
        bool v4 = dashes == 3 && !strstr(dashed, "--");
        for (char *p = dashed; *p; p++)
                if (*p == '-')
                        *p = v4 ? '.' : ':';
        uint8_t addr[16];
        int fam = v4 ? AF_INET : AF_INET6;
        if (inet_pton(fam, dashed, addr) != 1)
                return NXDOMAIN;
        uint16_t want = v4 ? DNS_T_A : DNS_T_AAAA;
        if (r->q->qtype != want)
                return NODATA;
        struct dns_rr rr = {
                .type = want, .ttl = r->z->ttl, .n_fixed = v4 ? 4 : 16, .fixed = addr
        };
        emit(r, 0, r->q->qname, &rr);
        return ANSWER;
}

/* Labels left of `<name>.<ns>.pod.<zone>` (an endpoint or a port and a
 * protocol to CoreDNS's parser) do not matter for pods: cut them. */
static char *pod_key(char *key, size_t *rel_labels, const char *zone)
{
        if (*rel_labels < 4 || *rel_labels > 5)
                return key;
        size_t n = strlen(key), zl = strlen(zone);
        /* "<...>.pod.<zone>": the label before the zone must be "pod" */
        if (n < zl + 5 || memcmp(key + n - zl - 5, ".pod.", 5) != 0)
                return key;
        for (size_t cut = *rel_labels - 3; cut > 0; cut--)
                key = strchr(key, '.') + 1;
        *rel_labels = 3;
        return key;
}

static enum outcome cluster(struct reply *r, char *key, size_t rel_labels)
{
        const struct se_dns_zone *z = r->z;
        uint16_t t = r->q->qtype;
        key = pod_key(key, &rel_labels, z->zone);
        drop_port_underscores(key, rel_labels);
        const struct dns_node *n = dns_zone_find(z, key, r->scratch);
        if (t == DNS_T_SOA) {
                if (n && n->kind == DNS_NODE_APEX) {
                        emit_soa(r, 0);
                        return ANSWER;
                }
                return NODATA; /* below the apex: NODATA, name or not */
        }
        if (!n) {
                if (z->pods == SE_DNS_PODS_INSECURE)
                        return insecure_pod(r, key, rel_labels);
                return NXDOMAIN;
        }
        switch (n->kind) {
        case DNS_NODE_VERSION:
                if (t != DNS_T_TXT)
                        return NXDOMAIN;
                break;
        case DNS_NODE_APEX:
        case DNS_NODE_BRANCH:
        case DNS_NODE_NAMESPACE:
                if (t == DNS_T_TXT)
                        return NXDOMAIN;
                break;
        case DNS_NODE_EXTERNAL:
                return external(r, n);
        default:
                break;
        }
        if (!has_type(n, t))
                return NODATA;
        emit_set(r, r->q->qname, &n->rrs, t);
        if (t == DNS_T_SRV)
                emit_additional(r, &n->rrs);
        return ANSWER;
}

static enum outcome reverse(struct reply *r, const char *key)
{
        const struct dns_node *n = dns_zone_find(r->z, key, r->scratch);
        bool at_apex = strcmp(key, "in-addr.arpa") == 0 || strcmp(key, "ip6.arpa") == 0;
        const char *parent = at_apex ? key : strchr(key, '.') + 1;
        if (r->q->qtype == DNS_T_SOA) {
                if (at_apex) {
                        emit_soa(r, 0);
                        return ANSWER;
                }
                return NODATA;
        }
        /* CoreDNS's name parser sees the apex, and "svc" or "pod" right
         * below it, as names without records, before it knows the zone is
         * a reverse one */
        if (at_apex || ((strncmp(key, "svc.", 4) == 0 || strncmp(key, "pod.", 4) == 0) &&
                        (strcmp(parent, "in-addr.arpa") == 0 || strcmp(parent, "ip6.arpa") == 0)))
                return NODATA;
        /* CoreDNS looks reverse names up for PTR alone: any other type, like
         * an address it does not know, is a name error (or falls through) */
        if (!n || r->q->qtype != DNS_T_PTR)
                return r->z->reverse_fallthrough ? FORWARD : NXDOMAIN;
        emit_set(r, r->q->qname, &n->rrs, r->q->qtype);
        return ANSWER;
}

/* ---- the response ---- */

static size_t header_reply(const struct dns_query *q, const uint8_t *query, unsigned rcode,
                           bool with_question, uint8_t *out, size_t cap)
{
        memset(out, 0, DNS_HDR);
        memcpy(out, query, 2);
        out[2] = (uint8_t)(0x80 | (query[2] & 0x78) | (q->opcode == 0 ? (query[2] & 1) : 0));
        out[3] = (uint8_t)((query[3] & 0x10) | rcode);
        size_t len = DNS_HDR;
        if (with_question && cap >= DNS_HDR + q->qname_len + 4) {
                memcpy(out + len, q->qname, q->qname_len);
                len += q->qname_len;
                dns_put16(out + len, q->qtype);
                dns_put16(out + len + 2, q->qclass);
                len += 4;
                dns_put16(out + 4, 1);
        }
        return len;
}

static void put_opt(struct reply *r, unsigned ext_rcode)
{
        uint8_t opt[11] = { 0, 0, DNS_T_OPT, 0, 0, (uint8_t)ext_rcode, 0, 0, 0, 0, 0 };
        dns_put16(opt + 3, (uint16_t)r->q->udp_size);
        if (r->q->do_bit)
                opt[7] = 0x80;
        r->w.limit += sizeof(opt); /* its room was kept */
        if (dns_put_bytes(&r->w, opt, sizeof(opt)) == 0)
                r->counts[2]++;
}

enum se_dns_verdict se_dns_answer(const struct se_dns_zone *z, const struct se_dns_client *c,
                                  const uint8_t *query, size_t qlen, uint8_t *out, size_t cap,
                                  size_t *outlen)
{
        struct dns_query q;
        *outlen = 0;
        enum dns_parse p = dns_parse_query(query, qlen, &q);
        if (p == DNS_PARSE_DROP || cap < SE_DNS_MIN_UDP)
                return SE_DNS_DROP;
        if (p != DNS_PARSE_OK) {
                unsigned rc = p == DNS_PARSE_NOTIMP ? DNS_RC_NOTIMP : DNS_RC_FORMERR;
                *outlen = header_reply(&q, query, rc, p == DNS_PARSE_FORMERR_Q, out, cap);
                /* miekg/dns rejects from the query's own header: TC, RD, RA,
                 * AD and CD stay as sent, Z is cleared, and a FORMERR says
                 * opcode QUERY whatever was asked */
                out[2] = (uint8_t)(0x80 | (rc == DNS_RC_NOTIMP ? query[2] & 0x78 : 0) |
                                   (query[2] & 0x03));
                out[3] = (uint8_t)((query[3] & 0xb0) | rc);
                return SE_DNS_REPLY;
        }
        if (q.edns && q.edns_version != 0) { /* RFC 6891 6.1.3, for every name */
                struct reply r = { .q = &q };
                r.w.buf = out;
                r.w.len = header_reply(&q, query, DNS_RC_BADVERS & 0xf, true, out, cap);
                r.w.limit = r.w.len;
                put_opt(&r, DNS_RC_BADVERS >> 4);
                dns_put16(out + 10, (uint16_t)r.counts[2]);
                *outlen = r.w.len;
                return SE_DNS_REPLY;
        }
        char key[KEY_MAX];
        int klen = dns_name_text(q.qname, q.qname_len, key, sizeof(key));
        if (klen < 0)
                return SE_DNS_DROP; /* cannot be: a wire name fits 1024 */
        bool in_cluster = ends_with(key, (size_t)klen, z->zone);
        bool in_v4 = ends_with(key, (size_t)klen, "in-addr.arpa");
        bool in_v6 = ends_with(key, (size_t)klen, "ip6.arpa");
        if (!in_cluster && !in_v4 && !in_v6)
                return SE_DNS_FORWARD;

        /* per query, on the stack; its buffer is not zeroed (only what is
         * taken from it is) */
        struct dns_scratch scratch, *sc = &scratch;
        sc->used = 0;
        sc->why = false;
        sc->want = q.qtype;
        sc->heap = (struct se_arena){ 0 };
        struct reply r = { .z = z, .q = &q, .scratch = sc };
        r.w.buf = out;
        size_t max = c && c->transport == SE_DNS_TCP ? SE_DNS_MAX_MSG : q.udp_size;
        r.w.limit = (max < cap ? max : cap) - (q.edns ? 11 : 0);
        size_t total = n_labels(q.qname);
        r.reverse = !in_cluster;
        size_t zone_labels = in_cluster ? n_labels(z->zone_wire) : 2;
        r.apex_label = label_at(q.qname, total - zone_labels);

        r.w.len = header_reply(&q, query, 0, false, out, cap);
        if (dns_put_name(&r.w, q.qname, false) < 0 || r.w.limit - r.w.len < 4)
                return SE_DNS_DROP;
        uint8_t qtc[4];
        dns_put16(qtc, q.qtype);
        dns_put16(qtc + 2, q.qclass);
        (void)dns_put_bytes(&r.w, qtc, 4);
        dns_put16(out + 4, 1);

        enum outcome o;
        if (q.qtype == DNS_T_AXFR || q.qtype == DNS_T_IXFR)
                o = REFUSED;
        else if (in_cluster)
                o = cluster(&r, key, total - zone_labels);
        else
                o = reverse(&r, key);
        /* what the table wrote is in the message now */
        dns_scratch_release(sc);
        if (o == FORWARD)
                return SE_DNS_FORWARD;
        unsigned rcode = o == NXDOMAIN ? DNS_RC_NXDOMAIN : o == REFUSED ? DNS_RC_REFUSED : 0;
        if (o == NXDOMAIN || o == NODATA)
                emit_soa(&r, 1);
        if (o != REFUSED)
                out[2] |= 0x04; /* AA: every answer of the plugin, negative ones too */
        if (q.edns)
                put_opt(&r, 0);
        out[3] = (uint8_t)((out[3] & 0xf0) | rcode);
        if (r.tc)
                out[2] |= 0x02;
        dns_put16(out + 6, (uint16_t)r.counts[0]);
        dns_put16(out + 8, (uint16_t)r.counts[1]);
        dns_put16(out + 10, (uint16_t)r.counts[2]);
        *outlen = r.w.len;
        return SE_DNS_REPLY;
}
