/* dns.h — cluster DNS: the zone from the store, the wire format, query → answer.
 *
 * pkg/dns does no I/O. A zone is an immutable snapshot built from the store
 * (Services, EndpointSlices, Namespaces, and Pods for `pods verified`), with
 * every answer prepared in wire form per name, so a query is a lookup and a
 * copy, not a rebuild. The daemon swaps snapshots when the store changes;
 * readers hold a reference and never wait on the writer.
 *
 * Ownership: se_dns_zone_build returns a zone with one reference; each
 * se_dns_zone_ref adds one, se_dns_zone_unref drops one (NULL-safe, returns
 * NULL) and frees the zone at zero. A zone may be read from any number of
 * threads at once.
 *
 * Errors: functions returning int give 0 or a negative errno; build failures
 * also fill the se_diag. se_dns_answer never fails on bad input: it says what
 * to do with the packet (see enum se_dns_verdict).
 *
 * This header is the contract between pkg/dns and cmd/svcenv-dns, cmd/svcenv
 * (`svcenv dns`). Add to it; change a declared signature only with both
 * sides. */
#ifndef SVCENV_DNS_H
#define SVCENV_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/diag.h>
#include <svcenv/store.h>

/* RFC 1035 limits and the caps every size is held to. */
#define SE_DNS_MAX_NAME 255 /* wire length of a name, with the root label */
#define SE_DNS_MAX_UDP  65535 /* an EDNS0 payload size above this is clamped */
#define SE_DNS_MIN_UDP  512 /* no EDNS0, or an EDNS0 size below this: 512 */
#define SE_DNS_MAX_MSG  65535 /* a message over TCP */

enum se_dns_pods { SE_DNS_PODS_DISABLED, SE_DNS_PODS_INSECURE, SE_DNS_PODS_VERIFIED };

struct se_dns_options {
        const char *zone; /* cluster domain, no trailing dot; NULL: "cluster.local" */
        uint32_t ttl; /* record TTL, 0..3600 (above: 3600); CoreDNS's default
                         is 5 (kubeadm writes 30): a zeroed struct means 0 */
        enum se_dns_pods pods; /* `pods` option; default disabled */
        bool endpoint_pod_names; /* CoreDNS `endpoint_pod_names` */
        bool reverse_fallthrough; /* kubeadm's `fallthrough in-addr.arpa ip6.arpa`:
                                     unknown reverse names are forwarded, not NXDOMAIN */
        uint32_t serial; /* SOA serial: Unix time of the newest change the
                            caller saw; 0: the time of the build */
};

struct se_dns_zone;

/* Builds a snapshot of the cluster zone from st (takes the store's read lock
 * itself). o may be NULL for the defaults. 0, -ENOMEM, or -EINVAL (bad zone
 * name: diag says why). */
int se_dns_zone_build(const struct se_store *st, const struct se_dns_options *o,
                      struct se_dns_zone **out, struct se_diag *diag);
/* se_dns_zone_build that reuses, from prev (a zone built from the same
 * store earlier, or NULL), the records of every Service whose object,
 * EndpointSlices and namespace's existence are unchanged (the same store
 * objects: they are immutable), so a change costs about what it touched
 * plus one pass over the store's lists and the reverse names. Answers are
 * those of se_dns_zone_build. prev is only read (it may be in use by
 * readers) and keeps its own reference; options other than prev's (zone,
 * ttl, endpoint_pod_names) rebuild everything. Same errors. */
int se_dns_zone_update(const struct se_store *st, const struct se_dns_options *o,
                       const struct se_dns_zone *prev, struct se_dns_zone **out,
                       struct se_diag *diag);
/* The Services a run of store changes touched, as the store's change
 * callbacks tell them (se_dns_changes_note): a Service by its key, an
 * EndpointSlice by the Service its label names (before and after), a
 * Namespace or any other kind as "everything". Past SE_DNS_MAX_CHANGED
 * Services (a relist) it also says "everything", as it does when a note
 * finds no memory. Not thread-safe: the caller locks. new returns NULL
 * when out of memory; free is NULL-safe. */
#define SE_DNS_MAX_CHANGED 4096
struct se_dns_changes;
struct se_dns_changes *se_dns_changes_new(void);
void se_dns_changes_free(struct se_dns_changes *c);
void se_dns_changes_note(struct se_dns_changes *c, const struct se_object *old,
                         const struct se_object *new_obj);
/* Everything changed (a failed build to retry, an unknown history). */
void se_dns_changes_note_all(struct se_dns_changes *c);
/* True when nothing was noted since the last clear. */
bool se_dns_changes_empty(const struct se_dns_changes *c);
/* True when "everything" was noted: the next update is a full pass. */
bool se_dns_changes_everything(const struct se_dns_changes *c);
void se_dns_changes_clear(struct se_dns_changes *c);
/* se_dns_zone_update told which Services changed since prev was built
 * (every change to the store since then noted in ch): the other Services'
 * records are taken from prev without a pass over the store's Services
 * and EndpointSlices, so a change costs about what it touched. ch NULL or
 * "everything", a changed set of namespaces, or options other than prev's
 * do what se_dns_zone_update does. Answers are those of
 * se_dns_zone_build as long as ch holds every change. Same errors. */
int se_dns_zone_update_changed(const struct se_store *st, const struct se_dns_options *o,
                               const struct se_dns_zone *prev, const struct se_dns_changes *ch,
                               struct se_dns_zone **out, struct se_diag *diag);
struct se_dns_zone *se_dns_zone_ref(struct se_dns_zone *z);
struct se_dns_zone *se_dns_zone_unref(struct se_dns_zone *z);
/* Serial of the SOA: Unix time of the newest change the snapshot saw. */
uint32_t se_dns_zone_serial(const struct se_dns_zone *z);

enum se_dns_transport { SE_DNS_UDP, SE_DNS_TCP };

/* What the server knows about the asker. */
struct se_dns_client {
        enum se_dns_transport transport;
        int family; /* AF_INET or AF_INET6, 0 when unknown */
        uint8_t addr[16]; /* source address (4 bytes used for AF_INET) */
};

enum se_dns_verdict {
        SE_DNS_REPLY, /* out[0..*outlen) is the response to send */
        SE_DNS_FORWARD, /* not ours: forward the query upstream (names outside the zone,
                           reverse names under fallthrough); *outlen is 0 */
        SE_DNS_DROP, /* not worth an answer (a response, too short for a header,
                        or cap below 512) */
};

/* Answers one query. out must hold cap bytes (≥ 512); for UDP the answer is
 * cut to the client's EDNS0 size (or 512) with TC set and no half records.
 * Malformed queries get FORMERR (or NOTIMP for an opcode other than QUERY)
 * when a header could be read, else DROP; an EDNS version other than 0 gets
 * BADVERS for any name. Only c->transport is read (c may be NULL: UDP).
 * Thread-safe on a shared zone: it reads the zone and writes only out. */
enum se_dns_verdict se_dns_answer(const struct se_dns_zone *z, const struct se_dns_client *c,
                                  const uint8_t *query, size_t qlen, uint8_t *out, size_t cap,
                                  size_t *outlen);

/* --- wire helpers the daemon's forwarder and cache need --- */

/* The first question of a message: name in lower case, presentation form
 * without the final dot ("" for the root; bytes outside [!-~], '.' and '\'
 * inside a label as \DDD) into name, its type and class (either pointer may
 * be NULL). 0; -EBADMSG when the message is malformed; -ENAMETOOLONG when
 * the name does not fit namecap (1024 always fits, 256 fits every name
 * without escapes). */
int se_dns_question(const uint8_t *msg, size_t len, char *name, size_t namecap, uint16_t *qtype,
                    uint16_t *qclass);
/* The smallest TTL of a response's answer and authority records (for a
 * negative answer: min(SOA TTL, SOA minimum), RFC 2308). -EBADMSG when
 * malformed; -ENOENT when it has no record to take a TTL from. */
int se_dns_min_ttl(const uint8_t *msg, size_t len, uint32_t *ttl);
/* Subtracts elapsed seconds from every TTL of a cached response in place
 * (not below 0; the OPT record untouched). 0 or -EBADMSG. */
int se_dns_age_ttls(uint8_t *msg, size_t len, uint32_t elapsed);
/* The bounds of CoreDNS's cache plugin (`cache 30`: 30 and 30; minimum
 * TTLs and the failure TTL 5 by default). */
struct se_dns_ttl_bounds {
        uint32_t min, max; /* positive answers */
        uint32_t min_neg, max_neg; /* NXDOMAIN and NODATA */
        uint32_t fail; /* SERVFAIL and NOTIMP */
};
/* Gives every record of a response (not the OPT) the one TTL CoreDNS's
 * cache gives a reply passing through it: the smallest TTL in the message
 * clamped to b by the kind of answer (positive, denial, server error; 5
 * clamped for a delegation or other error), in place. 0 or -EBADMSG
 * (nothing changed then). */
int se_dns_cache_ttls(uint8_t *msg, size_t len, const struct se_dns_ttl_bounds *b);
/* The EDNS0 UDP payload size a query offers (SE_DNS_MIN_UDP without OPT). */
size_t se_dns_udp_size(const uint8_t *query, size_t qlen);
/* Cuts a response in place to at most max bytes at a record boundary, sets
 * TC and fixes the counts (keeps the OPT record). Returns the new length:
 * len when it fits already, the header alone (TC set, no question) when
 * not even the question fits or the message does not parse, 0 when max is
 * below a header. */
size_t se_dns_truncate(uint8_t *msg, size_t len, size_t max);
/* A response with only the header and question of query, rcode set (for
 * SERVFAIL when no upstream answers, REFUSED). Returns its length, 0 when
 * the query has no readable question. */
size_t se_dns_error_reply(const uint8_t *query, size_t qlen, unsigned rcode, uint8_t *out,
                          size_t cap);

/* --- the zone as text, for `svcenv dns --zone` and `--explain` --- */

/* Every record of the zone as an RFC 1035 master file: the cluster zone,
 * in-addr.arpa and ip6.arpa, each opened by its SOA, owners in RFC 4034
 * canonical order, then by type (A AAAA CNAME PTR SRV TXT). Pod names of
 * `pods insecure` are made up per query and not listed. *ret is a new
 * string (free() it). 0 or -ENOMEM. */
int se_dns_zone_master(const struct se_dns_zone *z, char **ret);
/* The same with `\t; <Kind> <ns>/<name>` after each record: the object it
 * comes from (`--explain`). */
int se_dns_zone_explain(const struct se_dns_zone *z, char **ret);
/* The lines of se_dns_zone_explain whose owner is name (any case, final
 * dot optional, `_port._proto` or `port.proto`): every record the zone
 * holds for that name and the object behind each, for `svcenv dns
 * --explain NAME`. "" when the zone has none (NXDOMAIN, or a name made up
 * per query like a `pods insecure` one). *ret is a new string (free() it).
 * 0 or -ENOMEM. */
int se_dns_name_explain(const struct se_dns_zone *z, const char *name, char **ret);

#endif
