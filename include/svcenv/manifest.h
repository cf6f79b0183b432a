/* manifest.h — loading manifests (YAML or JSON files, folders, stdin).
 *
 * A manifest source holds any mix of YAML documents (`---` separated), JSON
 * values, `kind: List` objects (items are loaded), and folders of such files
 * (*.yaml, *.yml, *.json, read in name order, not recursively into dot
 * folders). Kinds svcenv does not model are skipped.
 *
 * Loading is all or nothing: on any error nothing is added to the store and
 * the diag names the file, line and field. */
#ifndef SVCENV_MANIFEST_H
#define SVCENV_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include <svcenv/diag.h>
#include <svcenv/store.h>

/* Caps on input the user controls. */
#define SE_MANIFEST_MAX_FILE  ((size_t)512 << 20) /* one file */
#define SE_MANIFEST_MAX_DEPTH 64 /* nesting of YAML/JSON */
#define SE_MANIFEST_MAX_FILES 100000 /* files in one folder */

struct se_manifest_stats {
        size_t objects; /* objects added */
        size_t skipped; /* objects of kinds svcenv does not model */
        size_t bytes; /* input bytes read */
};

/* Loads every path (a file, a folder, or "-" for stdin) into store. Objects
 * without a namespace go to default_ns (NULL: "default"). Returns 0,
 * -EINVAL (bad input: diag filled), -EEXIST (the same object twice: diag
 * filled), -EIO/-ENOENT (cannot read: diag filled) or -ENOMEM. stats may be
 * NULL. */
int se_manifest_load(struct se_store *store, const char *const *paths, size_t n_paths,
                     const char *default_ns, struct se_manifest_stats *stats, struct se_diag *diag);

/* What se_manifest_load_opts loads and how. */
struct se_manifest_opts {
        const char *default_ns; /* NULL: "default" */
        unsigned decode_flags; /* SE_DECODE_* (decode.h) for every object */
        /* (1 << SE_KIND_x) for each kind to load; 0: every kind. Objects
         * of other kinds are skipped unread (stats.skipped), as an
         * informer that does not watch them never sees them. */
        uint32_t kinds;
};

/* se_manifest_load with opts (NULL: as se_manifest_load with NULL
 * default_ns): a daemon's cache from files holds the same decoded forms as
 * from its informers. */
int se_manifest_load_opts(struct se_store *store, const char *const *paths, size_t n_paths,
                          const struct se_manifest_opts *opts, struct se_manifest_stats *stats,
                          struct se_diag *diag);

/* Same for one in-memory buffer named `name` (used in diagnostics). */
int se_manifest_load_buffer(struct se_store *store, const char *name, const char *data, size_t len,
                            const char *default_ns, struct se_manifest_stats *stats,
                            struct se_diag *diag);

#endif
