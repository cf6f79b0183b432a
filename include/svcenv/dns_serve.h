/* dns_serve.h — the pure pieces of serving DNS beyond dns.h: upstream
 * addresses and resolv.conf, the forwarder's answer cache, and a message as
 * dig-like text.
 *
 * No sockets here: the daemon (cmd/svcenv-dns) does the I/O, the CLI
 * (`svcenv dns`) prints. Every parser here reads outside input (flags, the
 * host's resolv.conf, packets from upstream) and is capped and fuzzed.
 *
 * Errors: 0 or a negative errno; parsers fill the se_diag with one line
 * naming where and what. */
#ifndef SVCENV_DNS_SERVE_H
#define SVCENV_DNS_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include <svcenv/diag.h>
#include <svcenv/strbuf.h>

/* ---- upstream resolvers ---- */

#define SE_DNS_MAX_UPSTREAMS   15 /* CoreDNS forward's limit */
#define SE_DNS_MAX_RESOLV_CONF ((size_t)64 << 10) /* resolv.conf read at most */

struct se_dns_upstream {
        struct sockaddr_storage addr; /* AF_INET or AF_INET6, port set */
        socklen_t len;
        char text[64]; /* "IP:PORT" or "[IPv6]:PORT", for logs and metrics */
};

/* One upstream: "IP", "IP:PORT", "[IPv6]", "[IPv6]:PORT", a bare IPv6
 * address, each optionally after "dns://" (CoreDNS's spelling). The port
 * defaults to 53. 0 or -EINVAL (diag says what). */
int se_dns_upstream_parse(const char *s, struct se_dns_upstream *ret, struct se_diag *diag);

/* The `nameserver` lines of a resolv.conf text (other lines ignored, '#' and
 * ';' start comments), in order, at most cap of them (more: the rest are
 * ignored, as glibc ignores more than three). file names the text in diag.
 * Returns the count (0 when there is none), or -EINVAL for a nameserver that
 * is not an address (diag: file, line, what). len is capped at
 * SE_DNS_MAX_RESOLV_CONF (-E2BIG beyond). */
int se_dns_resolv_conf_parse(const char *file, const char *text, size_t len,
                             struct se_dns_upstream *out, size_t cap, struct se_diag *diag);

/* ---- the forwarder's cache (kubeadm's `cache 30`) ---- */

struct se_dns_cache_opts {
        size_t max_entries; /* 0: 9984 (CoreDNS's capacity per kind) */
        size_t max_bytes; /* memory for the answers; 0: 32 MiB */
        uint32_t max_ttl; /* positive answers; 0: 30 (kubeadm's `cache 30`) */
        uint32_t max_neg_ttl; /* NXDOMAIN and NODATA; 0: 30 */
        uint32_t min_ttl; /* floor; 0: 5 (CoreDNS's MINTTL) */
};

struct se_dns_cache_stats {
        uint64_t hits_success, hits_denial, misses;
        uint64_t entries_success, entries_denial; /* now */
        uint64_t evictions;
};

struct se_dns_cache;

/* NULL on -ENOMEM; opts may be NULL. Thread-safe: any thread may get and
 * put at once (sharded locks, held for a copy). */
struct se_dns_cache *se_dns_cache_new(const struct se_dns_cache_opts *opts);
struct se_dns_cache *se_dns_cache_free(struct se_dns_cache *c);

/* Keeps response msg (an upstream's answer to a query for its question) for
 * min(its TTL, max), at least min_ttl; negative answers by their SOA (RFC
 * 2308). Only NOERROR and NXDOMAIN answers without TC are kept. now_s: a
 * monotonic second count. 0, -EINVAL (not cacheable: the caller moves on),
 * -EBADMSG, -ENOMEM. */
int se_dns_cache_put(struct se_dns_cache *c, const uint8_t *msg, size_t len, uint64_t now_s);

/* The cached answer to query (same name, type and class), with the query's
 * ID, RD bit and spelling of the name, TTLs aged by the time in cache, cut
 * to udp_max bytes with TC when udp_max is not 0. Returns the length written
 * to out, 0 on a miss (or when cap is too small). */
size_t se_dns_cache_get(struct se_dns_cache *c, const uint8_t *query, size_t qlen, uint64_t now_s,
                        size_t udp_max, uint8_t *out, size_t cap);

void se_dns_cache_stats(struct se_dns_cache *c, struct se_dns_cache_stats *ret);

/* ---- autopath ---- */

/* CoreDNS's autopath answer. resp is the answer to the name a client's
 * search path led to; the result is that answer given as the answer to
 * query (the name the client asked): the query's ID, RD bit and question,
 * then, when resp has answer records, a CNAME from the asked name to the
 * first record's owner with its TTL, then resp's records (names written
 * out whole). Cut to udp_max bytes with TC when udp_max is not 0. Returns
 * the length written to out, 0 when either message is malformed or out is
 * too small. */
size_t se_dns_autopath_reply(const uint8_t *query, size_t qlen, const uint8_t *resp, size_t rlen,
                             size_t udp_max, uint8_t *out, size_t cap);

/* The target of the last answer record of msg when that record is a
 * CNAME (an ExternalName's), lower case, presentation form without the
 * final dot, into name (>= 256 bytes). 0, -ENOENT (the last answer is not
 * a CNAME, or there is none), -EBADMSG. */
int se_dns_cname_target(const uint8_t *msg, size_t len, char *name, size_t cap);

/* reply (the zone's answer, ending in a CNAME) with the answer records of
 * extra (the answer for the CNAME's target) added after its own answers,
 * before its authority and additional records (the OPT stays last); names
 * written out whole; reply's header, flags and question. Cut to udp_max
 * with TC when not 0. Returns the length, 0 when malformed or no room. */
size_t se_dns_append_answers(const uint8_t *reply, size_t rlen, const uint8_t *extra, size_t elen,
                             size_t udp_max, uint8_t *out, size_t cap);

/* ---- a message as text ---- */

/* Appends msg in dig's layout: the header line (opcode, status, id), flags
 * and counts, then the QUESTION, ANSWER, AUTHORITY and ADDITIONAL sections,
 * one record a line ("name. TTL IN TYPE rdata"). The ID is printed only
 * when with_id. Decodes at most SE_DNS_MAX_MSG bytes and 64 compression
 * jumps per name. 0, -EBADMSG (sb holds what could be decoded), -ENOMEM. */
int se_dns_msg_text(const uint8_t *msg, size_t len, bool with_id, struct se_strbuf *sb);

/* A query for name (presentation form, a final '.' optional) and type
 * (e.g. "A", "SRV", "TYPE65"): RD set, id given, with an EDNS0 OPT offering
 * edns bytes when edns is not 0. Returns the length, or -EINVAL (a bad
 * name or type; diag says which), -ENOSPC. */
int se_dns_query_make(const char *name, const char *type, uint16_t id, uint16_t edns, uint8_t *out,
                      size_t cap, struct se_diag *diag);

/* Type number of a mnemonic ("A", "aaaa", "TYPE33"); -EINVAL when unknown. */
int se_dns_type_code(const char *s);
/* Mnemonic of a type ("A", "SRV"); NULL when we have no name for it. */
const char *se_dns_type_name(uint16_t type);

#endif
