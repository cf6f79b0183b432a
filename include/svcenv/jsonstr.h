/* jsonstr.h — writing a C string as a JSON string, the one way every
 * library and daemon does it (admission responses, JSON log lines, health
 * bodies).
 *
 * Escapes `"` and `\`, writes \n \r \t as such and other control
 * characters as \u00XX, copies valid UTF-8 as it is, and replaces every
 * byte that does not start a valid UTF-8 sequence (stray continuation
 * bytes, overlong forms, surrogates, above U+10FFFF, truncated sequences)
 * with \ufffd, one per byte, as Go's encoding/json does. Unlike Go it does
 * not escape <, >, & and U+2028/U+2029 (the JSON reads the same). */
#ifndef SVCENV_JSONSTR_H
#define SVCENV_JSONSTR_H

#include <svcenv/strbuf.h>

/* Appends s with the quotes. Errors: the strbuf's (se_strbuf_failed). */
void se_json_put_string(struct se_strbuf *sb, const char *s);
/* Appends s without the quotes. */
void se_json_put_escaped(struct se_strbuf *sb, const char *s);

#endif
