/* yaml.h — YAML (or JSON) text to one jansson tree.
 *
 * The same reader the manifest loader uses (YAML 1.1 scalars as Kubernetes
 * reads them, anchors and merge keys, duplicate keys and deep nesting
 * refused), exposed for other configuration files such as kubeconfig. */
#ifndef SVCENV_YAML_H
#define SVCENV_YAML_H

#include <stddef.h>

#include <jansson.h>

#include <svcenv/diag.h>

/* Parses data (len bytes; need not be NUL-terminated) holding at most one
 * YAML document. *ret is a new reference, or NULL when the text holds no
 * document. Returns 0, -EINVAL (diag: line, column and message; also when
 * there is more than one document) or -ENOMEM. diag may be NULL. */
int se_yaml_load(const char *data, size_t len, json_t **ret, struct se_diag *diag);

#endif
