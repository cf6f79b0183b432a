/* wire.c — reading queries and responses, and the helpers the daemon's
 * forwarder and cache use on messages that are not ours. Every offset is
 * checked against the message length before it is read. */
#include <errno.h>
#include <string.h>

#include "dns_internal.h"

/* One resource record at *off: its type, where its TTL is and where it ends.
 * 0 or -EBADMSG. */
struct rr_pos {
        size_t start, ttl_at, rdata_at, end;
        uint16_t type, klass, rdlen;
};

static int read_rr(const uint8_t *msg, size_t len, size_t *off, struct rr_pos *rr)
{
        rr->start = *off;
        if (dns_skip_name(msg, len, off) < 0 || len - *off < 10)
                return -EBADMSG;
        const uint8_t *p = msg + *off;
        rr->type = dns_get16(p);
        rr->klass = dns_get16(p + 2);
        rr->ttl_at = *off + 4;
        rr->rdlen = dns_get16(p + 8);
        rr->rdata_at = *off + 10;
        if (len - rr->rdata_at < rr->rdlen)
                return -EBADMSG;
        *off = rr->end = rr->rdata_at + rr->rdlen;
        return 0;
}

/* Offset just past the questions; -EBADMSG when they do not parse. */
static long skip_questions(const uint8_t *msg, size_t len)
{
        size_t off = DNS_HDR;
        if (len < DNS_HDR)
                return -EBADMSG;
        for (unsigned i = 0, n = dns_get16(msg + 4); i < n; i++) {
                if (dns_skip_name(msg, len, &off) < 0 || len - off < 4)
                        return -EBADMSG;
                off += 4;
        }
        return (long)off;
}

static int read_opt(const uint8_t *msg, const struct rr_pos *rr, struct dns_query *q)
{
        if (rr->end - rr->start < 11 || msg[rr->start] != 0) /* owner must be the root */
                return -EBADMSG;
        if (q->edns) /* RFC 6891 6.1.1: more than one OPT is FORMERR */
                return -EBADMSG;
        q->edns = true;
        q->udp_size = rr->klass < SE_DNS_MIN_UDP ? SE_DNS_MIN_UDP : rr->klass;
        q->edns_version = msg[rr->ttl_at + 1];
        q->do_bit = (msg[rr->ttl_at + 2] & 0x80) != 0;
        /* options are walked only to check they are well formed; none is
         * answered (as CoreDNS without the plugins that use them) */
        size_t o = rr->rdata_at;
        while (o < rr->end) {
                if (rr->end - o < 4)
                        return -EBADMSG;
                size_t olen = dns_get16(msg + o + 2);
                if (rr->end - o - 4 < olen)
                        return -EBADMSG;
                o += 4 + olen;
        }
        return 0;
}

enum dns_parse dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q)
{
        memset(q, 0, sizeof(*q));
        if (len < DNS_HDR || (msg[2] & 0x80))
                return DNS_PARSE_DROP;
        q->id = dns_get16(msg);
        q->opcode = (msg[2] >> 3) & 0xf;
        q->rd = msg[2] & 1;
        q->cd = (msg[3] & 0x10) != 0;
        q->udp_size = SE_DNS_MIN_UDP;
        if (q->opcode != 0)
                return DNS_PARSE_NOTIMP;
        /* the counts a query may have (those miekg/dns, under CoreDNS,
         * accepts): one question, at most one answer and authority record,
         * two additional ones */
        unsigned an = dns_get16(msg + 6), ns = dns_get16(msg + 8), ar = dns_get16(msg + 10);
        if (dns_get16(msg + 4) != 1 || an > 1 || ns > 1 || ar > 2)
                return DNS_PARSE_FORMERR;
        size_t off = DNS_HDR;
        int n = dns_read_name(msg, len, &off, q->qname);
        if (n < 0 || len - off < 4)
                return DNS_PARSE_FORMERR;
        q->qname_len = (size_t)n;
        q->qtype = dns_get16(msg + off);
        q->qclass = dns_get16(msg + off + 2);
        off += 4;
        for (unsigned i = 0; i < an + ns + ar; i++) {
                struct rr_pos rr;
                if (read_rr(msg, len, &off, &rr) < 0)
                        return DNS_PARSE_FORMERR_Q;
                if (rr.type == DNS_T_OPT) {
                        if (i < an + ns || read_opt(msg, &rr, q) < 0)
                                return DNS_PARSE_FORMERR_Q;
                }
        }
        return DNS_PARSE_OK;
}

int se_dns_question(const uint8_t *msg, size_t len, char *name, size_t namecap, uint16_t *qtype,
                    uint16_t *qclass)
{
        uint8_t wire[SE_DNS_MAX_NAME];
        size_t off = DNS_HDR;
        if (len < DNS_HDR || dns_get16(msg + 4) == 0)
                return -EBADMSG;
        int n = dns_read_name(msg, len, &off, wire);
        if (n < 0 || len - off < 4)
                return -EBADMSG;
        int r = dns_name_text(wire, (size_t)n, name, namecap);
        if (r < 0)
                return r == -EINVAL ? -EBADMSG : r;
        if (qtype)
                *qtype = dns_get16(msg + off);
        if (qclass)
                *qclass = dns_get16(msg + off + 2);
        return 0;
}

/* Calls fn for every record after the questions; stops at the first error
 * or when fn returns non-zero. Section: 0 answer, 1 authority, 2 additional. */
typedef int (*rr_fn)(void *data, unsigned section, const struct rr_pos *rr);

static int each_rr(const uint8_t *msg, size_t len, rr_fn fn, void *data)
{
        long q = skip_questions(msg, len);
        if (q < 0)
                return -EBADMSG;
        size_t off = (size_t)q;
        unsigned counts[3] = { dns_get16(msg + 6), dns_get16(msg + 8), dns_get16(msg + 10) };
        for (unsigned s = 0; s < 3; s++)
                for (unsigned i = 0; i < counts[s]; i++) {
                        struct rr_pos rr;
                        if (read_rr(msg, len, &off, &rr) < 0)
                                return -EBADMSG;
                        int r = fn(data, s, &rr);
                        if (r)
                                return r;
                }
        return 0;
}

struct min_ttl {
        const uint8_t *msg;
        bool found;
        uint32_t ttl;
};

static int take_min(void *data, unsigned section, const struct rr_pos *rr)
{
        struct min_ttl *m = data;
        if (section == 2 || rr->type == DNS_T_OPT)
                return 0;
        uint32_t t = dns_get32(m->msg + rr->ttl_at);
        if (rr->type == DNS_T_SOA && section == 1 && rr->rdlen >= 22) {
                /* RFC 2308 5: a negative answer lives min(SOA TTL, MINIMUM) */
                uint32_t minimum = dns_get32(m->msg + rr->end - 4);
                if (minimum < t)
                        t = minimum;
        }
        if (!m->found || t < m->ttl)
                m->ttl = t;
        m->found = true;
        return 0;
}

int se_dns_min_ttl(const uint8_t *msg, size_t len, uint32_t *ttl)
{
        struct min_ttl m = { .msg = msg };
        if (each_rr(msg, len, take_min, &m) < 0)
                return -EBADMSG;
        if (!m.found)
                return -ENOENT;
        *ttl = m.ttl;
        return 0;
}

struct age {
        uint8_t *msg;
        uint32_t elapsed;
};

static int age_one(void *data, unsigned section, const struct rr_pos *rr)
{
        struct age *a = data;
        (void)section;
        if (rr->type == DNS_T_OPT) /* its "TTL" is flags */
                return 0;
        uint32_t t = dns_get32(a->msg + rr->ttl_at);
        dns_put32(a->msg + rr->ttl_at, t > a->elapsed ? t - a->elapsed : 0);
        return 0;
}

int se_dns_age_ttls(uint8_t *msg, size_t len, uint32_t elapsed)
{
        struct age a = { .msg = msg, .elapsed = elapsed };
        /* a dry run first: a malformed message is left as it was */
        struct min_ttl m = { .msg = msg };
        if (each_rr(msg, len, take_min, &m) < 0)
                return -EBADMSG;
        return each_rr(msg, len, age_one, &a) < 0 ? -EBADMSG : 0;
}

/* CoreDNS's cache plugin rewrites every answer that passes through it, cached
 * or not (plugin/cache WriteMsg): all records get one TTL, the message's
 * smallest clamped to the cache's bounds, by the kind of answer
 * (response.Typify). */
struct whole_ttl {
        uint8_t *msg;
        bool soa, ns, any;
        uint32_t min;
};

static int scan_whole(void *data, unsigned section, const struct rr_pos *rr)
{
        struct whole_ttl *w = data;
        if (rr->type == DNS_T_OPT)
                return 0;
        w->any = true;
        if (section == 1 && rr->type == DNS_T_SOA)
                w->soa = true;
        if (section == 1 && rr->type == DNS_T_NS)
                w->ns = true;
        uint32_t t = dns_get32(w->msg + rr->ttl_at);
        if (t < w->min)
                w->min = t;
        return 0;
}

static int set_whole(void *data, unsigned section, const struct rr_pos *rr)
{
        struct whole_ttl *w = data;
        (void)section;
        if (rr->type != DNS_T_OPT)
                dns_put32(w->msg + rr->ttl_at, w->min);
        return 0;
}

static uint32_t clamp(uint32_t v, uint32_t lo, uint32_t hi)
{
        v = v < lo ? lo : v;
        return v > hi ? hi : v;
}

int se_dns_cache_ttls(uint8_t *msg, size_t len, const struct se_dns_ttl_bounds *b)
{
        /* CoreDNS's MinimalDefaultTTL: the message TTL of a kind it does not
         * take from the records */
        const uint32_t fallback = 5;
        if (len < DNS_HDR)
                return -EBADMSG;
        unsigned rcode = msg[3] & 0x0f;
        bool answers = dns_get16(msg + 6) > 0;
        struct whole_ttl w = { .msg = msg, .min = UINT32_MAX };
        if (each_rr(msg, len, scan_whole, &w) < 0)
                return -EBADMSG;
        if (!w.any)
                return 0;
        uint32_t ttl;
        if (answers && rcode == DNS_RC_NOERROR) { /* success */
                ttl = clamp(w.min < b->max ? w.min : b->max, b->min, b->max);
        } else if (!answers &&
                   ((w.soa && rcode == DNS_RC_NOERROR) || rcode == DNS_RC_NXDOMAIN)) { /* denial */
                ttl = clamp(w.min < b->max_neg ? w.min : b->max_neg, b->min_neg, b->max_neg);
        } else if (rcode == DNS_RC_SERVFAIL || rcode == DNS_RC_NOTIMP) {
                ttl = b->fail; /* server error: the failure TTL as it is */
        } else if (!w.ns && rcode == DNS_RC_NOERROR) { /* success, empty */
                ttl = clamp(w.min < b->max ? w.min : b->max, b->min, b->max);
        } else { /* a delegation, NXDOMAIN with answers, other errors */
                ttl = clamp(fallback, b->min, b->max);
        }
        w.min = ttl;
        return each_rr(msg, len, set_whole, &w) < 0 ? -EBADMSG : 0;
}

size_t se_dns_udp_size(const uint8_t *query, size_t qlen)
{
        struct dns_query q;
        if (dns_parse_query(query, qlen, &q) != DNS_PARSE_OK)
                return SE_DNS_MIN_UDP;
        return q.udp_size;
}

struct cut {
        size_t max; /* records must end at or before it */
        size_t keep_end;
        unsigned kept[3];
        bool stop;
        size_t opt_start, opt_end;
};

static int cut_one(void *data, unsigned section, const struct rr_pos *rr)
{
        struct cut *c = data;
        if (rr->type == DNS_T_OPT && section == 2) {
                c->opt_start = rr->start;
                c->opt_end = rr->end;
                return 0;
        }
        if (c->stop || rr->end > c->max) {
                c->stop = true;
                return 0;
        }
        c->keep_end = rr->end;
        c->kept[section]++;
        return 0;
}

/* Not even the question fits (or the message does not parse): the header
 * alone still says "truncated, ask over TCP". */
static size_t header_only(uint8_t *msg, size_t len, size_t max)
{
        if (max < DNS_HDR || len < DNS_HDR)
                return 0;
        memset(msg + 4, 0, 8);
        msg[2] |= 0x02;
        return DNS_HDR;
}

size_t se_dns_truncate(uint8_t *msg, size_t len, size_t max)
{
        if (len <= max)
                return len;
        long q = skip_questions(msg, len);
        struct cut probe = { .max = len }; /* finds the OPT, whose room is kept */
        if (q < 0 || (size_t)q > max || each_rr(msg, len, cut_one, &probe) < 0)
                return header_only(msg, len, max);
        size_t opt_len = probe.opt_end - probe.opt_start;
        if (opt_len > max - (size_t)q)
                opt_len = 0; /* an OPT too big to keep: dropped */
        struct cut c = { .max = max - opt_len, .keep_end = (size_t)q };
        (void)each_rr(msg, len, cut_one, &c);
        if (opt_len) {
                memmove(msg + c.keep_end, msg + probe.opt_start, opt_len);
                c.kept[2]++;
        }
        dns_put16(msg + 6, (uint16_t)c.kept[0]);
        dns_put16(msg + 8, (uint16_t)c.kept[1]);
        dns_put16(msg + 10, (uint16_t)c.kept[2]);
        msg[2] |= 0x02;
        return c.keep_end + opt_len;
}

size_t se_dns_error_reply(const uint8_t *query, size_t qlen, unsigned rcode, uint8_t *out,
                          size_t cap)
{
        uint8_t name[SE_DNS_MAX_NAME];
        size_t off = DNS_HDR;
        if (qlen < DNS_HDR || dns_get16(query + 4) == 0)
                return 0;
        int n = dns_read_name(query, qlen, &off, name);
        if (n < 0 || qlen - off < 4 || cap < DNS_HDR + (size_t)n + 4)
                return 0;
        memset(out, 0, DNS_HDR);
        memcpy(out, query, 2);
        out[2] = (uint8_t)(0x80 | (query[2] & 0x79)); /* QR, opcode, RD */
        out[3] = (uint8_t)((query[3] & 0x10) | (rcode & 0xf)); /* CD */
        dns_put16(out + 4, 1);
        memcpy(out + DNS_HDR, name, (size_t)n);
        memcpy(out + DNS_HDR + n, query + off, 4);
        return DNS_HDR + (size_t)n + 4;
}
