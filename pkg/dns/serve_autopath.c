/* CoreDNS's autopath answer: the answer for the name a client's search path
 * led to, rewritten as the answer to the name the client asked, with a
 * CNAME from the one to the other in front. The records are copied with
 * their names written out whole, so that replacing the question cannot
 * break a compression pointer. */
#include <errno.h>
#include <string.h>

#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>

#include "dns_internal.h"

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

struct out {
        uint8_t *buf;
        size_t len, cap;
        bool full;
};

static void put(struct out *o, const void *p, size_t n)
{
        if (o->full || n > o->cap - o->len) {
                o->full = true;
                return;
        }
        memcpy(o->buf + o->len, p, n);
        o->len += n;
}

static void put16(struct out *o, uint16_t v)
{
        uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
        put(o, b, 2);
}

/* Copies the (possibly compressed) name at msg[*off] whole into o; moves
 * *off past it. -EBADMSG when malformed. */
static int copy_name(const uint8_t *msg, size_t len, size_t *off, struct out *o)
{
        struct dns_label_walk w;
        const uint8_t *label;
        int l;
        dns_label_walk_init(&w, msg, len, *off);
        while ((l = dns_label_walk_next(&w, &label)) > 0)
                put(o, label - 1, 1u + (size_t)l); /* with its length byte */
        if (l < 0)
                return l;
        put(o, "", 1);
        *off = w.end;
        return 0;
}

/* One record: owner, fixed part, rdata with the names of the types that
 * may compress them (RFC 3597 §4) written out whole. */
static int copy_record(const uint8_t *msg, size_t len, size_t *off, struct out *o,
                       size_t *first_owner, uint32_t *first_ttl)
{
        size_t owner_at = o->len;
        if (copy_name(msg, len, off, o) < 0 || len - *off < 10)
                return -EBADMSG;
        const uint8_t *h = msg + *off;
        uint16_t type = get16(h), rdlen = get16(h + 8);
        size_t rd = *off + 10, end = rd + rdlen;
        if (end > len)
                return -EBADMSG;
        if (first_owner && *first_owner == (size_t)-1 && type != 41) {
                *first_owner = owner_at;
                *first_ttl =
                        (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
        }
        put(o, h, 8);
        size_t rdlen_at = o->len;
        put16(o, 0);
        size_t start = o->len, p = rd;
        int r = 0;
        switch (type) {
        case 2: /* NS */
        case 5: /* CNAME */
        case 12: /* PTR */
                r = copy_name(msg, end, &p, o);
                break;
        case 15: /* MX */
                if (rdlen < 3)
                        return -EBADMSG;
                put(o, msg + p, 2);
                p += 2;
                r = p < end ? copy_name(msg, end, &p, o) : -EBADMSG;
                break;
        case 33: /* SRV */
                if (rdlen < 7)
                        return -EBADMSG;
                put(o, msg + p, 6);
                p += 6;
                r = p < end ? copy_name(msg, end, &p, o) : -EBADMSG;
                break;
        case 6: /* SOA */
                if ((r = copy_name(msg, end, &p, o)) == 0 &&
                    (r = copy_name(msg, end, &p, o)) == 0) {
                        if (end - p != 20)
                                return -EBADMSG;
                        put(o, msg + p, 20);
                        p += 20;
                }
                break;
        default:
                put(o, msg + rd, rdlen);
                p = end;
                break;
        }
        if (r < 0 || p != end)
                return -EBADMSG;
        if (!o->full) {
                size_t n = o->len - start;
                o->buf[rdlen_at] = (uint8_t)(n >> 8);
                o->buf[rdlen_at + 1] = (uint8_t)n;
        }
        *off = end;
        return 0;
}

static size_t name_end(const uint8_t *msg, size_t len, size_t off)
{
        while (off < len) {
                uint8_t l = msg[off];
                if (l == 0)
                        return off + 1;
                if (l & 0xc0)
                        return 0; /* a query's name is never compressed */
                off += 1u + l;
        }
        return 0;
}

size_t se_dns_autopath_reply(const uint8_t *query, size_t qlen, const uint8_t *resp, size_t rlen,
                             size_t udp_max, uint8_t *out, size_t cap)
{
        if (qlen < 12 || rlen < 12 || cap < 12)
                return 0;
        size_t qend = name_end(query, qlen, 12);
        if (!qend || qend + 4 > qlen || get16(query + 4) != 1 || get16(resp + 4) != 1)
                return 0;
        struct out o = { out, 0, cap, false };
        put(&o, resp, 12);
        out[0] = query[0];
        out[1] = query[1];
        out[2] = (uint8_t)((out[2] & ~0x01) | (query[2] & 0x01));
        /* the question as asked */
        put(&o, query + 12, qend + 4 - 12);
        size_t off = 12;
        struct out skip = { NULL, 0, 0, true };
        if (copy_name(resp, rlen, &off, &skip) < 0 || rlen - off < 4)
                return 0;
        off += 4;
        uint16_t counts[3] = { get16(resp + 6), get16(resp + 8), get16(resp + 10) };
        /* the answer section is written after a CNAME slot, filled once the
         * first record's owner and TTL are known */
        uint8_t recs[SE_DNS_MAX_MSG];
        struct out r = { recs, 0, sizeof(recs), false };
        size_t first_owner = (size_t)-1;
        uint32_t first_ttl = 0;
        size_t an_end = 0;
        for (int s = 0; s < 3; s++) {
                for (unsigned i = 0; i < counts[s]; i++)
                        if (copy_record(resp, rlen, &off, &r, s == 0 ? &first_owner : NULL,
                                        &first_ttl) < 0)
                                return 0;
                if (s == 0)
                        an_end = r.len;
        }
        if (r.full)
                return 0;
        uint16_t an = counts[0];
        if (first_owner != (size_t)-1) {
                /* CNAME <asked> -> <owner of the first answer>, its TTL */
                struct out skip2 = { NULL, 0, 0, true };
                size_t p = first_owner;
                (void)copy_name(recs, r.len, &p, &skip2);
                put(&o, query + 12, qend - 12);
                put16(&o, 5);
                put16(&o, 1);
                uint8_t ttl[4] = { (uint8_t)(first_ttl >> 24), (uint8_t)(first_ttl >> 16),
                                   (uint8_t)(first_ttl >> 8), (uint8_t)first_ttl };
                put(&o, ttl, 4);
                put16(&o, (uint16_t)(p - first_owner));
                put(&o, recs + first_owner, p - first_owner);
                an++;
        }
        (void)an_end;
        put(&o, recs, r.len);
        if (o.full)
                return 0;
        out[6] = (uint8_t)(an >> 8);
        out[7] = (uint8_t)an;
        size_t n = o.len;
        if (udp_max && n > udp_max)
                n = se_dns_truncate(out, n, udp_max);
        return n;
}

/* ---- an ExternalName's target, resolved upstream ---- */

int se_dns_cname_target(const uint8_t *msg, size_t len, char *name, size_t cap)
{
        if (len < 12 || get16(msg + 4) != 1 || cap < SE_DNS_MAX_NAME + 1)
                return -EBADMSG;
        struct out skip = { NULL, 0, 0, true };
        size_t off = 12;
        if (copy_name(msg, len, &off, &skip) < 0 || len - off < 4)
                return -EBADMSG;
        off += 4;
        unsigned an = get16(msg + 6);
        uint8_t target[SE_DNS_MAX_NAME + 1] = { 0 };
        bool last_is_cname = false;
        for (unsigned i = 0; i < an; i++) {
                if (copy_name(msg, len, &off, &skip) < 0 || len - off < 10)
                        return -EBADMSG;
                uint16_t type = get16(msg + off), rdlen = get16(msg + off + 8);
                size_t rd = off + 10;
                if (rdlen > len - rd)
                        return -EBADMSG;
                last_is_cname = type == 5;
                if (last_is_cname) {
                        struct out t = { target, 0, sizeof(target), false };
                        size_t p = rd;
                        if (copy_name(msg, rd + rdlen, &p, &t) < 0 || t.full)
                                return -EBADMSG;
                }
                off = rd + rdlen;
        }
        if (!last_is_cname)
                return -ENOENT;
        /* wire to presentation, lower case, no final dot */
        size_t o = 0;
        for (size_t p = 0; target[p]; p += 1u + target[p]) {
                if (o)
                        name[o++] = '.';
                for (size_t k = 1; k <= target[p]; k++) {
                        char c = (char)target[p + k];
                        name[o++] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
                }
        }
        name[o] = '\0';
        return 0;
}

size_t se_dns_append_answers(const uint8_t *reply, size_t rlen, const uint8_t *extra, size_t elen,
                             size_t udp_max, uint8_t *out, size_t cap)
{
        if (rlen < 12 || elen < 12 || cap < 12 || get16(reply + 4) != 1 || get16(extra + 4) != 1)
                return 0;
        struct out o = { out, 0, cap, false };
        struct out skip = { NULL, 0, 0, true };
        put(&o, reply, 12);
        size_t off = 12, eoff = 12;
        size_t qstart = off;
        if (copy_name(reply, rlen, &off, &skip) < 0 || rlen - off < 4 ||
            copy_name(extra, elen, &eoff, &skip) < 0 || elen - eoff < 4)
                return 0;
        off += 4;
        eoff += 4;
        /* the question as the reply has it: written out whole */
        size_t q = qstart;
        if (copy_name(reply, rlen, &q, &o) < 0)
                return 0;
        put(&o, reply + q, 4);
        uint16_t an = get16(reply + 6), ns = get16(reply + 8), ar = get16(reply + 10);
        uint16_t ean = get16(extra + 6);
        for (unsigned i = 0; i < an; i++)
                if (copy_record(reply, rlen, &off, &o, NULL, NULL) < 0)
                        return 0;
        for (unsigned i = 0; i < ean; i++)
                if (copy_record(extra, elen, &eoff, &o, NULL, NULL) < 0)
                        return 0;
        for (unsigned i = 0; i < (unsigned)ns + ar; i++)
                if (copy_record(reply, rlen, &off, &o, NULL, NULL) < 0)
                        return 0;
        if (o.full || (unsigned)an + ean > 65535)
                return 0;
        unsigned total = an + ean;
        out[6] = (uint8_t)(total >> 8);
        out[7] = (uint8_t)total;
        size_t n = o.len;
        if (udp_max && n > udp_max)
                n = se_dns_truncate(out, n, udp_max);
        return n;
}
