/* The nft script -> nf_tables netlink translation (proxy_nftparse.c) and the
 * batch it fills (proxy_nlbatch.c). Library-internal. */
#ifndef SVCENV_PROXY_NLBATCH_H
#define SVCENV_PROXY_NLBATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/proxy.h>

struct nlmsghdr;

/* Caps on what a script may make us build. */
#define NLB_MAX_BYTES (512u << 20) /* one batch */
#define NLB_HEADROOM  (128u << 10) /* free space before each message */
#define NLB_MAX_ELEMS (64u << 20) /* elements of one set in one script */

/* A growing run of netlink messages; lines[i] is the script line of the
 * i-th message (for error messages). Sequence numbers are set on send. */
struct nlb {
        char *buf;
        size_t len, cap;
        uint32_t *lines;
        size_t n, lines_cap;
};

void proxy_nlb_init(struct nlb *b);
void proxy_nlb_release(struct nlb *b);
/* A new message header (NLM_F_REQUEST | flags) at the end with
 * NLB_HEADROOM free after it; NULL when out of memory or past
 * NLB_MAX_BYTES. Finish it with proxy_nlb_end before the next. */
struct nlmsghdr *proxy_nlb_begin(struct nlb *b, uint16_t type, uint8_t family, uint16_t flags,
                                 unsigned line);
void proxy_nlb_end(struct nlb *b, struct nlmsghdr *nh);
/* Appends src's messages. 0 or -ENOMEM/-E2BIG. */
int proxy_nlb_append(struct nlb *b, const struct nlb *src);

/* What an element needs to know of a set the script did not declare. */
struct nfp_set_info {
        uint32_t flags, key_type, key_len, data_type, data_len;
        uint32_t key_byteorder; /* nft's: 1 host, 2 big endian, 0 unknown */
};
/* Fills info for table/set of family from the kernel: 0, -ENOENT, or a
 * negative errno. */
typedef int (*nfp_set_lookup)(void *ctx, uint8_t family, const char *table, const char *set,
                              struct nfp_set_info *info);

/* Whether the kernel has table/set of family before the batch: 1, 0, or a
 * negative errno (then it is taken as there and not asked again). */
typedef int (*nfp_set_exists)(void *ctx, uint8_t family, const char *table, const char *set);

/* What the translator may ask the kernel; either may be NULL. */
struct nfp_kernel {
        nfp_set_lookup lookup; /* NULL: elements of undeclared sets are an error */
        nfp_set_exists exists; /* NULL: declared sets are taken as there */
        bool exists_cheap; /* its answers cost nothing: asked for every set */
        void *ctx;
};

/* Translates an nft script of the subset our writers emit into b (one
 * message per object; no batch begin/end). k->lookup resolves sets the
 * script did not declare; k->exists, asked only by a script declaring
 * many sets unless exists_cheap, tells which are new, whose elements then name them by the
 * batch's set id alone (the kernel finds those among the batch's new sets,
 * not by walking the table's list of sets). 0; -EINVAL with "line N: ..."
 * in err for a construct it does not know or bad input; -ENOMEM; -E2BIG
 * past a cap. */
int proxy_nft_translate_for(const char *script, size_t n, struct nlb *b, const struct nfp_kernel *k,
                            char *err, size_t errsize);
/* proxy_nft_translate_for with lookup alone */
int proxy_nft_translate(const char *script, size_t n, struct nlb *b, nfp_set_lookup lookup,
                        void *ctx, char *err, size_t errsize);

/* se_proxy_apply without the netlink path: the tool itself (proxy_apply.c) */
int proxy_apply_tool(enum se_proxy_tool tool, const char *data, size_t n, char *err,
                     size_t errsize);

#endif
