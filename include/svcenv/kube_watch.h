/* kube_watch.h — watch streams and informers.
 *
 * A watch body is newline-delimited JSON events whose boundaries do not
 * follow the network's chunks: se_kube_lines reassembles lines under a cap.
 * se_kube_watch runs one watch request; an informer keeps a store in sync
 * with list + watch, resuming from the last resourceVersion, relisting on
 * 410 Gone, backing off 0.8 s doubling to 30 s between failures, with a
 * random 5–10 min timeoutSeconds per watch. */
#ifndef SVCENV_KUBE_WATCH_H
#define SVCENV_KUBE_WATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <svcenv/kube_client.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

#define SE_KUBE_MAX_WATCH_LINE ((size_t)16 << 20) /* default cap of one event */

/* ---- line splitter ---- */

struct se_kube_lines {
        struct se_strbuf partial; /* bytes of the line not yet complete */
        size_t max_line;
};

/* Called with one complete line (no '\n', a trailing '\r' removed; not
 * NUL-terminated; borrowed). < 0 stops feeding with that error. */
typedef int (*se_kube_line_fn)(void *data, const char *line, size_t len);

/* max_line 0: SE_KUBE_MAX_WATCH_LINE. Never fails. */
void se_kube_lines_init(struct se_kube_lines *l, size_t max_line);
void se_kube_lines_release(struct se_kube_lines *l);
/* Splits buf into lines, calling fn for each complete non-empty one.
 * Returns 0, fn's error, -E2BIG when a line is longer than max_line, or
 * -ENOMEM. After an error the splitter must be released. */
int se_kube_lines_feed(struct se_kube_lines *l, const char *buf, size_t len, se_kube_line_fn fn,
                       void *data);
/* Delivers a final line without '\n' (if any). Same results. */
int se_kube_lines_finish(struct se_kube_lines *l, se_kube_line_fn fn, void *data);

/* ---- one watch request ---- */

enum se_kube_event_type { SE_KUBE_ADDED, SE_KUBE_MODIFIED, SE_KUBE_DELETED, SE_KUBE_BOOKMARK };

/* One event; object is borrowed for the call. < 0 stops the watch with that
 * error. */
typedef int (*se_kube_event_fn)(void *data, enum se_kube_event_type type, const json_t *object);

/* Parses one event line. ERROR events give the Status' mapped errno (410 →
 * -ESTALE) with the message in diag. Otherwise 0, *ret_type and *ret_doc
 * (new reference; the object is json_object_get(doc, "object")). */
int se_kube_event_parse(const char *line, size_t len, enum se_kube_event_type *ret_type,
                        json_t **ret_doc, struct se_diag *diag);

struct se_kube_watch_opts {
        const char *label_selector;
        const char *field_selector;
        unsigned timeout_s; /* timeoutSeconds; 0: random in [300, 600] */
        size_t max_line; /* 0: SE_KUBE_MAX_WATCH_LINE */
};

/* Watches res in ns from resource version rv (in/out: updated to the
 * version of every event, bookmarks included; "" = from now with synthetic
 * ADDED events), with allowWatchBookmarks. Returns 0 when the server ended
 * the stream (timeout), -ESTALE when the version is too old (HTTP 410 or
 * an ERROR event: relist), -ECANCELED when cancel (may be NULL) became true,
 * fn's error, or another mapped error with diag. */
int se_kube_watch(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                  const struct se_kube_watch_opts *opts, char rv[SE_KUBE_RV_MAX],
                  se_kube_event_fn fn, void *data, const atomic_bool *cancel, struct se_diag *diag);

/* ---- informer ---- */

struct se_kube_informer;

struct se_kube_informer_opts {
        const char *ns; /* NULL: all namespaces */
        const char *label_selector;
        const char *field_selector;
        unsigned watch_timeout_s; /* 0: random 5–10 min */
        unsigned decode_flags; /* SE_DECODE_* (decode.h) for listed and watched objects;
                                  SE_DECODE_NUL_AS_C080 is always added */
};

/* Called (from the informer's thread) after every failed list or watch,
 * e.g. to log it. May be NULL. */
typedef void (*se_kube_informer_error_fn)(void *data, int err, const char *message);

/* An informer keeping the objects of kind in store (se_store_put/delete)
 * equal to the API server's. Consumers learn of changes through the store's
 * own callbacks (se_store_subscribe), typically to add a key to a work
 * queue; after a relist, objects that vanished meanwhile are deleted from
 * the store (so subscribers see a DELETE for them). opts may be NULL. c and store are borrowed
 * and must outlive it. NULL on -ENOMEM. */
struct se_kube_informer *se_kube_informer_new(struct se_kube_client *c, enum se_kind kind,
                                              struct se_store *store,
                                              const struct se_kube_informer_opts *opts,
                                              se_kube_informer_error_fn on_error, void *data);
/* Starts its thread: list, then watch forever. 0 or -errno. */
int se_kube_informer_start(struct se_kube_informer *inf);
/* True once the first full list is in the store. */
bool se_kube_informer_has_synced(const struct se_kube_informer *inf);
/* Waits until synced: 0, -ETIMEDOUT. */
int se_kube_informer_wait_synced(const struct se_kube_informer *inf, unsigned timeout_ms);
/* Counters for tests and metrics. */
unsigned se_kube_informer_lists(const struct se_kube_informer *inf);
/* Stops the thread (cancels its request) and frees. NULL-safe; NULL. */
struct se_kube_informer *se_kube_informer_free(struct se_kube_informer *inf);

#endif
