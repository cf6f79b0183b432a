/* store_yaml.h — a store filled from manifest text, for unit tests. */
#ifndef SVCENV_TEST_STORE_YAML_H
#define SVCENV_TEST_STORE_YAML_H

struct se_store;

/* A new store (se_store_free it) holding the objects of yaml (any manifest
 * text, read as "test.yaml"). Fails the current cmocka test, naming the
 * error and its line, when the text does not load. */
struct se_store *t_load(const char *yaml);

#endif
