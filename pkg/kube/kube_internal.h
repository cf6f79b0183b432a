/* Helpers shared inside pkg/kube. */
#ifndef SVCENV_KUBE_INTERNAL_H
#define SVCENV_KUBE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/diag.h>

struct se_kube_client;

/* A bearer token goes into a header: a control character (CR, LF, ...;
 * tab aside) would end it and start another, so it is refused, as Go's
 * net/http refuses such a header value for client-go. */
#define KUBE_TOKEN_CTL_MSG \
 "contains a control character (such as CR or LF), which an HTTP header cannot carry"
bool kube_token_ok(const char *token);
/* Strips the white space around a token read from a file, in place (client-go
 * trims it). */
void kube_token_trim(char *token);

/* Reads a whole file of at most max bytes into a new NUL-terminated buffer.
 * 0, -EFBIG (larger than max), -ENOMEM or the open/read errno. */
int kube_read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* Receives the body of a streaming 2xx response, chunk by chunk as the
 * network delivers it. < 0 aborts the transfer with that error. */
typedef int (*kube_chunk_fn)(void *data, const char *buf, size_t len);

/* GET path and feed a 2xx body to fn as it arrives (watch). Non-2xx bodies
 * are collected and mapped as for se_kube_request. timeout_ms < 0: none. */
int kube_stream(struct se_kube_client *c, const char *path, const atomic_bool *cancel,
                long timeout_ms, kube_chunk_fn fn, void *data, long *ret_code,
                struct se_diag *diag);

/* Sleeps ns unless c or cancel is cancelled first: 0 or -ECANCELED. */
int kube_sleep(struct se_kube_client *c, uint64_t ns, const atomic_bool *cancel);

struct se_strbuf;
/* Appends "?key=value" or "&key=value", value percent-encoded; NULL value:
 * nothing. Errors are left sticky in q. */
void kube_query_add(struct se_strbuf *q, const char *key, const char *value);
#endif
