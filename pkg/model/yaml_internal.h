/* YAML (and JSON) text to jansson trees, with optional line tracking. */
#ifndef SVCENV_MODEL_YAML_INTERNAL_H
#define SVCENV_MODEL_YAML_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

#include <svcenv/diag.h>

/* Maps JSON nodes of a parsed document to the 1-based line they start on. */
struct linemap;

struct linemap *model_linemap_new(void);
struct linemap *model_linemap_free(struct linemap *lm);
unsigned model_linemap_get(const struct linemap *lm, const json_t *node);

struct yaml_docs {
        json_t **docs; /* one tree per non-empty document (new references) */
        unsigned *lines; /* the line each document starts on */
        size_t n;
};

void model_yaml_docs_release(struct yaml_docs *d);

/* Parses every document of a YAML stream. Plain scalars resolve as YAML 1.1
 * does in Kubernetes' YAML reader (true/yes/on, 0x1F, 0777, 1_000, .inf,
 * ~/null); quoted and block scalars are strings; anchors, aliases and `<<`
 * merge keys are supported; duplicate keys, nesting deeper than
 * SE_MANIFEST_MAX_DEPTH and alias expansion past a node budget are errors.
 * lines may be NULL; when given it receives the line of every node whose
 * nesting depth is below line_depth (0: every node) — depth 3 covers each
 * document, a List's items and each item, which is what object lines need.
 * 0, -EINVAL (diag: line, column, message) or -ENOMEM. */
int model_yaml_parse(const char *data, size_t len, struct linemap *lines, int line_depth,
                     struct yaml_docs *ret, struct se_diag *diag);

/* The node a decoder path ("spec.ports[0].name", "" for root) names in root,
 * or the deepest node on the way when the path leads nowhere. Keys may contain
 * dots: the longest key that matches wins. */
const json_t *model_json_find_path(const json_t *root, const char *path);

#endif
