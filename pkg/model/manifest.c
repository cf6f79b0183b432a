/* Manifest files, folders and stdin into the store, all or nothing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/decode.h>
#include <svcenv/manifest.h>
#include <svcenv/strbuf.h>
#include <svcenv/strv.h>

#include "yaml_internal.h"

#define MAX_FOLDER_DEPTH 8
#define MAX_LIST_DEPTH   8 /* Lists in Lists */

_Static_assert(SE_KIND_COUNT <= 32, "se_manifest_opts.kinds is a 32-bit mask");

/* File names objects point to (`source`): kept for the life of the process,
 * shared by every object of a file, so an object's exact-size arena is not
 * grown by a copy. A handful of names per run. */
static struct se_strv source_names = SE_STRV_INIT;
static pthread_mutex_t source_names_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *intern_source(const char *name)
{
        const char *found = NULL;
        pthread_mutex_lock(&source_names_lock);
        for (size_t i = source_names.n; i > 0 && !found; i--)
                if (strcmp(source_names.v[i - 1], name) == 0)
                        found = source_names.v[i - 1];
        if (!found && se_strv_push(&source_names, name) == 0)
                found = source_names.v[source_names.n - 1];
        pthread_mutex_unlock(&source_names_lock);
        return found;
}

struct loader {
        struct se_store *staged; /* objects of this call until all succeeded */
        const struct se_store *target;
        const char *default_ns;
        unsigned decode_flags;
        uint32_t kinds; /* 0: every kind */
        struct se_manifest_stats stats;
        struct se_diag *diag;
};

/* Where one document's text came from, to find error lines on demand. */
struct source {
        const char *name;
        const char *data;
        size_t len;
        bool json;
        bool mapped; /* data is a private file mapping: pages behind the reader can go */
};

/* The line of `path` inside object `item` (-1: the document itself) of
 * document `doc`, found by parsing the source again with full line tracking.
 * Only runs on the error path. */
static unsigned find_line(const struct source *src, size_t doc, long item, const char *path)
{
        struct linemap *lm = model_linemap_new();
        struct yaml_docs docs = { 0 };
        unsigned line = 0;
        if (lm && model_yaml_parse(src->data, src->len, lm, 0, &docs, NULL) == 0 && doc < docs.n) {
                const json_t *obj = docs.docs[doc];
                if (item >= 0)
                        obj = json_array_get(json_object_get(obj, "items"), (size_t)item);
                const json_t *node = obj ? model_json_find_path(obj, path) : NULL;
                line = model_linemap_get(lm, node);
                if (!line)
                        line = model_linemap_get(lm, obj);
        }
        model_yaml_docs_release(&docs);
        model_linemap_free(lm);
        return line;
}

static void describe(char *buf, size_t size, const json_t *json, const char *list_kind,
                     const char *default_ns)
{
        const char *kind = json_string_value(json_object_get(json, "kind"));
        if (!kind)
                kind = list_kind;
        int k = kind ? se_kind_from_name(kind) : -1;
        const json_t *meta = json_object_get(json, "metadata");
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        if ((!ns || !*ns) && k >= 0 && se_kind_namespaced((enum se_kind)k))
                ns = default_ns ? default_ns : "default";
        const char *name = json_string_value(json_object_get(meta, "name"));
        if (!name)
                name = json_string_value(json_object_get(meta, "generateName"));
        snprintf(buf, size, "%s %s%s%s: ", kind ? kind : "object", ns ? ns : "", ns ? "/" : "",
                 name ? name : "(unnamed)");
}

/* Decodes one object and stages it. */
static int load_object(struct loader *l, const struct source *src, const json_t *json, size_t doc,
                       long item, unsigned line, const char *list_kind)
{
        struct se_decode_error err;
        struct se_object *obj = NULL;
        int r;
        bool listed = list_kind && json_is_object(json) && !json_object_get(json, "kind");
        const char *kind_name =
                listed ? list_kind : json_string_value(json_object_get(json, "kind"));
        int k = kind_name ? se_kind_from_name(kind_name) : -1;
        if (l->kinds && k >= 0 && !(l->kinds & (UINT32_C(1) << k))) {
                /* a kind the caller does not read: skipped unchecked, as an
                 * informer that does not watch it never sees it */
                l->stats.skipped++;
                return 0;
        }
        if (listed)
                r = k < 0 ? 1 :
                            se_decode_object_flags(json, (enum se_kind)k, l->default_ns,
                                                   l->decode_flags, &obj, &err);
        else
                r = se_decode_object_flagged(json, l->default_ns, l->decode_flags, &obj, &err);
        if (r == 1) {
                l->stats.skipped++;
                return 0;
        }
        if (r == -EINVAL) {
                char what[600];
                describe(what, sizeof(what), json, list_kind, l->default_ns);
                unsigned at = find_line(src, doc, item, err.path);
                se_diag_set(l->diag, src->name, at ? at : line, 0, "%s%s%s%s", what, err.path,
                            err.path[0] ? ": " : "", err.message);
                return r;
        }
        if (r < 0)
                return r;
        struct se_meta_more *more = se_meta_more(&obj->meta, &obj->arena);
        if (!more) {
                se_object_unref(obj);
                return -ENOMEM;
        }
        more->source = intern_source(src->name);
        more->source_line = line;
        const char *ns = obj->meta.namespace, *name = obj->meta.name;
        enum se_kind kind = obj->kind;
        if (se_store_get(l->target, kind, ns, name) || se_store_get(l->staged, kind, ns, name)) {
                const struct se_object *prev = se_store_get(l->staged, kind, ns, name);
                if (!line)
                        line = find_line(src, doc, item, "");
                se_diag_set(l->diag, src->name, line, 0, "%s %s%s%s is defined twice%s",
                            se_kind_name(kind), ns, *ns ? "/" : "", name,
                            prev && se_object_source_line(prev) ? " (see the earlier definition)" :
                                                                  "");
                se_object_unref(obj);
                return -EEXIST;
        }
        r = se_store_add(l->staged, obj);
        if (r == 0)
                l->stats.objects++;
        return r;
}

/* A List (`kind: List`, or `kind: FooList` from the API whose items carry no
 * kind): its item kind in item_kind ("" for List). */
static bool is_list(const json_t *o, char item_kind[64])
{
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const json_t *items = json_object_get(o, "items");
        size_t kl = kind ? strlen(kind) : 0;
        if (!kind || kl < 4 || strcmp(kind + kl - 4, "List") != 0 ||
            !(json_is_array(items) || json_is_null(items) || !items))
                return false;
        item_kind[0] = '\0';
        if (kl > 4 && kl - 4 < 64) {
                memcpy(item_kind, kind, kl - 4);
                item_kind[kl - 4] = '\0';
        }
        return true;
}

/* The items of a List; a List among them is flattened too, as kubectl's
 * resource builder does (to a bounded depth). */
static int load_list(struct loader *l, const struct source *src, const json_t *list,
                     const char *item_kind, size_t doc_index, unsigned line,
                     const struct linemap *lines, unsigned depth)
{
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(list, "items"), i, it) {
                unsigned item_line = model_linemap_get(lines, it);
                char inner_kind[64];
                int r;
                if (json_is_object(it) && is_list(it, inner_kind)) {
                        if (depth >= MAX_LIST_DEPTH) {
                                se_diag_set(l->diag, src->name, item_line ? item_line : line, 0,
                                            "items[%zu]: Lists nested deeper than %d", i,
                                            MAX_LIST_DEPTH);
                                return -EINVAL;
                        }
                        r = load_list(l, src, it, inner_kind, doc_index,
                                      item_line ? item_line : line, lines, depth + 1);
                } else {
                        r = load_object(l, src, it, doc_index, (long)i,
                                        item_line ? item_line : line,
                                        item_kind[0] ? item_kind : NULL);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A document: one object, or a List. */
static int load_document(struct loader *l, const struct source *src, const json_t *doc,
                         size_t doc_index, unsigned line, const struct linemap *lines)
{
        if (!json_is_object(doc)) {
                se_diag_set(l->diag, src->name, line, 0, "expected an object, got %s",
                            json_is_array(doc) ? "a list" : "a scalar");
                return -EINVAL;
        }
        char item_kind[64];
        if (is_list(doc, item_kind))
                return load_list(l, src, doc, item_kind, doc_index, line, lines, 1);
        return load_object(l, src, doc, doc_index, -1, line, NULL);
}

/* Lines are counted as the reader moves on, never from the start again. */
static unsigned advance_line(const struct source *src, size_t *counted, size_t off, unsigned line)
{
        for (; *counted < off; (*counted)++)
                line += src->data[*counted] == '\n';
        return line;
}

/* A large file is mapped, not copied; what the JSON reader has passed is
 * given back every 16 MiB so a stream of objects never holds the whole file
 * in memory. (An error re-reads the file from the page cache for lines.) */
static void release_behind(const struct source *src, size_t off, size_t *released)
{
        const size_t step = (size_t)16 << 20;
        if (!src->mapped || off < *released + step)
                return;
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t end = off & ~(page - 1);
        (void)madvise(SE_UNCONST(char, src->data) + *released, end - *released, MADV_DONTNEED);
        *released = end;
}

static int load_json(struct loader *l, const struct source *src)
{
        size_t off = 0, doc = 0, counted = 0, released = 0;
        unsigned line = 1;
        for (;;) {
                while (off < src->len && strchr(" \t\r\n", src->data[off]))
                        off++;
                if (off >= src->len)
                        return 0;
                line = advance_line(src, &counted, off, line);
                json_error_t jerr;
                json_t *j = json_loadb(src->data + off, src->len - off,
                                       JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY | JSON_ALLOW_NUL |
                                               JSON_REJECT_DUPLICATES,
                                       &jerr);
                if (!j) {
                        /* jansson's line is relative to where this value started */
                        se_diag_set(l->diag, src->name, line + (unsigned)jerr.line - 1,
                                    (unsigned)jerr.column, "invalid JSON: %s", jerr.text);
                        return -EINVAL;
                }
                int r = load_document(l, src, j, doc++, line, NULL);
                off += jerr.position;
                json_decref(j);
                if (r < 0)
                        return r;
                release_behind(src, off, &released);
        }
}

static int load_yaml(struct loader *l, const struct source *src)
{
        struct yaml_docs docs = { 0 };
        struct linemap *lines = model_linemap_new();
        if (!lines)
                return -ENOMEM;
        int r = model_yaml_parse(src->data, src->len, lines, 3, &docs, l->diag);
        if (r == -EINVAL)
                snprintf(l->diag->file, sizeof(l->diag->file), "%s", src->name);
        for (size_t i = 0; r == 0 && i < docs.n; i++) {
                unsigned line = model_linemap_get(lines, docs.docs[i]);
                r = load_document(l, src, docs.docs[i], i, line ? line : docs.lines[i], lines);
        }
        model_yaml_docs_release(&docs);
        model_linemap_free(lines);
        return r;
}

static int load_source(struct loader *l, const struct source *src)
{
        l->stats.bytes += src->len;
        if (src->len > SE_MANIFEST_MAX_FILE) {
                se_diag_set(l->diag, src->name, 0, 0, "larger than %zu MiB",
                            SE_MANIFEST_MAX_FILE >> 20);
                return -EINVAL;
        }
        /* A UTF-8 BOM is allowed by both formats' readers in Kubernetes. */
        struct source s = *src;
        if (s.len >= 3 && memcmp(s.data, "\xef\xbb\xbf", 3) == 0) {
                s.data += 3;
                s.len -= 3;
        }
        size_t i = 0;
        while (i < s.len && strchr(" \t\r\n", s.data[i]))
                i++;
        s.json = i < s.len && (s.data[i] == '{' || s.data[i] == '[');
        return s.json ? load_json(l, &s) : load_yaml(l, &s);
}

/* Reads all of fd, at most SE_MANIFEST_MAX_FILE + 1 bytes. */
static int read_all(int fd, struct se_strbuf *out)
{
        for (;;) {
                int r = se_strbuf_grow(out, 65536);
                if (r < 0)
                        return r;
                ssize_t n = read(fd, out->buf + out->len, 65536);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return 0;
                out->len += (size_t)n;
                out->buf[out->len] = '\0';
        }
}

/* Regular files are mapped read-only; anything else (stdin, pipes) is read. */
static int map_file(struct loader *l, const char *path, int fd, const struct stat *st)
{
        if ((size_t)st->st_size > SE_MANIFEST_MAX_FILE) {
                se_diag_set(l->diag, path, 0, 0, "larger than %zu MiB", SE_MANIFEST_MAX_FILE >> 20);
                return -EINVAL;
        }
        struct source src = { .name = path, .data = "", .len = 0, .mapped = true };
        void *p = NULL;
        if (st->st_size > 0) {
                p = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_PRIVATE, fd, 0);
                if (p == MAP_FAILED) {
                        se_diag_set(l->diag, path, 0, 0, "cannot read: %s", strerror(errno));
                        return -EIO;
                }
                (void)madvise(p, (size_t)st->st_size, MADV_SEQUENTIAL);
                src.data = p;
                src.len = (size_t)st->st_size;
        }
        int r = load_source(l, &src);
        if (p)
                munmap(p, (size_t)st->st_size);
        return r;
}

static int load_file(struct loader *l, const char *path, int fd)
{
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                return map_file(l, path, fd, &st);
        struct se_strbuf sb;
        se_strbuf_init(&sb, SE_MANIFEST_MAX_FILE + 65536 + 1);
        int r = read_all(fd, &sb);
        if (r == -E2BIG || (r == 0 && sb.len > SE_MANIFEST_MAX_FILE)) {
                se_diag_set(l->diag, path, 0, 0, "larger than %zu MiB", SE_MANIFEST_MAX_FILE >> 20);
                r = -EINVAL;
        } else if (r < 0 && r != -ENOMEM) {
                se_diag_set(l->diag, path, 0, 0, "cannot read: %s", strerror(-r));
                r = -EIO;
        } else if (r == 0) {
                struct source src = { .name = path, .data = sb.buf, .len = sb.len };
                r = load_source(l, &src);
        }
        se_strbuf_release(&sb);
        return r;
}

static bool manifest_name(const char *name)
{
        size_t n = strlen(name);
        return (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
               (n > 4 && strcmp(name + n - 4, ".yml") == 0) ||
               (n > 5 && strcmp(name + n - 5, ".json") == 0);
}

static int load_path(struct loader *l, const char *path, int depth);

static int load_folder(struct loader *l, const char *path, int depth)
{
        DIR *dir = opendir(path);
        if (!dir) {
                se_diag_set(l->diag, path, 0, 0, "cannot open folder: %s", strerror(errno));
                return -EIO;
        }
        struct se_strv names = SE_STRV_INIT;
        int r = 0;
        struct dirent *de;
        while ((de = readdir(dir))) {
                if (de->d_name[0] == '.')
                        continue;
                if (names.n >= SE_MANIFEST_MAX_FILES) {
                        se_diag_set(l->diag, path, 0, 0, "more than %d entries",
                                    SE_MANIFEST_MAX_FILES);
                        r = -EINVAL;
                        break;
                }
                if ((r = se_strv_push(&names, de->d_name)) < 0)
                        break;
        }
        closedir(dir);
        se_strv_sort(&names);
        for (size_t i = 0; r == 0 && i < names.n; i++) {
                char *child = NULL;
                if (se_asprintf(&child, "%s/%s", path, names.v[i]) < 0) {
                        r = -ENOMEM;
                        break;
                }
                struct stat st;
                if (stat(child, &st) == 0 && S_ISDIR(st.st_mode)) {
                        if (depth >= MAX_FOLDER_DEPTH) {
                                se_diag_set(l->diag, child, 0, 0, "folders nested deeper than %d",
                                            MAX_FOLDER_DEPTH);
                                r = -EINVAL;
                        } else {
                                r = load_path(l, child, depth + 1);
                        }
                } else if (manifest_name(names.v[i])) {
                        r = load_path(l, child, depth + 1);
                }
                free(child);
        }
        se_strv_release(&names);
        return r;
}

static int load_path(struct loader *l, const char *path, int depth)
{
        if (strcmp(path, "-") == 0)
                return load_file(l, "<stdin>", 0);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                se_diag_set(l->diag, path, 0, 0, "cannot open: %s", strerror(e));
                return e == ENOENT ? -ENOENT : -EIO;
        }
        struct stat st;
        int r;
        if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
                close(fd);
                return load_folder(l, path, depth);
        }
        r = load_file(l, path, fd);
        close(fd);
        return r;
}

/* Moves every staged object into the target store. */
static int commit(struct se_store *target, const struct se_store *staged)
{
        for (int k = 0; k < SE_KIND_COUNT; k++) {
                const struct se_object **objs;
                long n = se_store_list(staged, (enum se_kind)k, NULL, &objs);
                if (n < 0)
                        return (int)n;
                for (long i = 0; i < n; i++) {
                        int r = se_store_put(target,
                                             se_object_ref(SE_UNCONST(struct se_object, objs[i])));
                        if (r < 0) {
                                free(objs);
                                return r;
                        }
                }
                free(objs);
        }
        return 0;
}

static int run(struct se_store *store, const char *const *paths, size_t n_paths,
               const struct source *buffer, const struct se_manifest_opts *opts,
               struct se_manifest_stats *stats, struct se_diag *diag)
{
        struct se_diag local = { 0 };
        struct loader l = { .target = store,
                            .default_ns = opts ? opts->default_ns : NULL,
                            .decode_flags = opts ? opts->decode_flags : 0,
                            .kinds = opts ? opts->kinds : 0,
                            .diag = diag ? diag : &local };
        memset(l.diag, 0, sizeof(*l.diag));
        l.staged = se_store_new();
        if (!l.staged)
                return -ENOMEM;
        int r = 0;
        if (buffer)
                r = load_source(&l, buffer);
        for (size_t i = 0; r == 0 && i < n_paths; i++)
                r = load_path(&l, paths[i], 0);
        if (r == 0)
                r = commit(store, l.staged);
        if (r == -ENOMEM)
                se_diag_set(l.diag, NULL, 0, 0, "out of memory");
        se_store_free(l.staged);
        if (r == 0 && stats)
                *stats = l.stats;
        return r;
}

int se_manifest_load(struct se_store *store, const char *const *paths, size_t n_paths,
                     const char *default_ns, struct se_manifest_stats *stats, struct se_diag *diag)
{
        struct se_manifest_opts o = { .default_ns = default_ns };
        return run(store, paths, n_paths, NULL, &o, stats, diag);
}

int se_manifest_load_opts(struct se_store *store, const char *const *paths, size_t n_paths,
                          const struct se_manifest_opts *opts, struct se_manifest_stats *stats,
                          struct se_diag *diag)
{
        return run(store, paths, n_paths, NULL, opts, stats, diag);
}

int se_manifest_load_buffer(struct se_store *store, const char *name, const char *data, size_t len,
                            const char *default_ns, struct se_manifest_stats *stats,
                            struct se_diag *diag)
{
        struct source src = { .name = name, .data = data, .len = len };
        struct se_manifest_opts o = { .default_ns = default_ns };
        return run(store, NULL, 0, &src, &o, stats, diag);
}
