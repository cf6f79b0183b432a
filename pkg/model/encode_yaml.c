/* JSON trees as block-style YAML that reads back to the same JSON. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/encode.h>
#include <svcenv/strbuf.h>

/* A string may be written plain when a YAML 1.1 reader would read it back
 * as the same string (not a bool, null or number, no special characters). */
static bool plain_safe(const char *s)
{
        static const char *const words[] = { "y",    "Y",     "yes",   "Yes",   "YES",  "n",
                                             "N",    "no",    "No",    "NO",    "true", "True",
                                             "TRUE", "false", "False", "FALSE", "on",   "On",
                                             "ON",   "off",   "Off",   "OFF",   "null", "Null",
                                             "NULL", "~",     NULL };
        if (!*s)
                return false;
        for (size_t i = 0; words[i]; i++)
                if (strcmp(s, words[i]) == 0)
                        return false;
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' || *s == '/'))
                return false;
        for (const char *p = s; *p; p++) {
                char c = *p;
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '.' || c == '/'))
                        return false;
        }
        return true;
}

static void put_string(struct se_strbuf *out, const char *s, size_t len)
{
        if (strlen(s) == len && plain_safe(s)) {
                se_strbuf_puts(out, s);
                return;
        }
        se_strbuf_putc(out, '"');
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '"' || c == '\\') {
                        se_strbuf_putc(out, '\\');
                        se_strbuf_putc(out, (char)c);
                } else if (c == '\n') {
                        se_strbuf_puts(out, "\\n");
                } else if (c == '\t') {
                        se_strbuf_puts(out, "\\t");
                } else if (c < 0x20 || c == 0x7f) {
                        se_strbuf_printf(out, "\\x%02x", c);
                } else {
                        se_strbuf_putc(out, (char)c);
                }
        }
        se_strbuf_putc(out, '"');
}

static void indent(struct se_strbuf *out, int n)
{
        for (int i = 0; i < n; i++)
                se_strbuf_putc(out, ' ');
}

static void put_scalar(struct se_strbuf *out, const json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_STRING:
                put_string(out, json_string_value(v), json_string_length(v));
                break;
        case JSON_INTEGER:
                se_strbuf_printf(out, "%lld", (long long)json_integer_value(v));
                break;
        case JSON_REAL: {
                double d = json_real_value(v);
                /* keep a fraction so it reads back as a float */
                if (d == floor(d) && fabs(d) < 1e15)
                        se_strbuf_printf(out, "%.1f", d);
                else
                        se_strbuf_printf(out, "%.17g", d);
                break;
        }
        case JSON_TRUE:
                se_strbuf_puts(out, "true");
                break;
        case JSON_FALSE:
                se_strbuf_puts(out, "false");
                break;
        case JSON_OBJECT:
                se_strbuf_puts(out, "{}");
                break;
        case JSON_ARRAY:
                se_strbuf_puts(out, "[]");
                break;
        default:
                se_strbuf_puts(out, "null");
        }
}

static bool is_block(const json_t *v)
{
        return (json_is_object(v) && json_object_size(v)) ||
               (json_is_array(v) && json_array_size(v));
}

static void put_node(struct se_strbuf *out, const json_t *v, int level, int depth);

/* Object entries, the first one already indented (list items start inline). */
static void put_object(struct se_strbuf *out, const json_t *o, int level, bool first_inline,
                       int depth)
{
        const char *k;
        const json_t *v;
        bool first = true;
        json_object_foreach(SE_UNCONST(json_t, o), k, v) {
                if (!(first && first_inline))
                        indent(out, level);
                first = false;
                put_string(out, k, strlen(k));
                se_strbuf_putc(out, ':');
                if (is_block(v)) {
                        se_strbuf_putc(out, '\n');
                        /* lists stay at the key's level, as kubectl writes them */
                        put_node(out, v, json_is_array(v) ? level : level + 2, depth + 1);
                } else {
                        se_strbuf_putc(out, ' ');
                        put_scalar(out, v);
                        se_strbuf_putc(out, '\n');
                }
        }
}

static void put_node(struct se_strbuf *out, const json_t *v, int level, int depth)
{
        if (depth > 200) {
                se_strbuf_puts(out, "null\n");
                return;
        }
        if (json_is_object(v)) {
                put_object(out, v, level, false, depth);
                return;
        }
        size_t i;
        const json_t *item;
        json_array_foreach(SE_UNCONST(json_t, v), i, item) {
                indent(out, level);
                se_strbuf_puts(out, "- ");
                if (json_is_object(item) && json_object_size(item)) {
                        put_object(out, item, level + 2, true, depth + 1);
                } else if (json_is_array(item) && json_array_size(item)) {
                        se_strbuf_putc(out, '\n');
                        put_node(out, item, level + 2, depth + 1);
                } else {
                        put_scalar(out, item);
                        se_strbuf_putc(out, '\n');
                }
        }
}

int se_encode_yaml(const json_t *json, struct se_strbuf *out)
{
        if (is_block(json))
                put_node(out, json, 0, 0);
        else {
                put_scalar(out, json);
                se_strbuf_putc(out, '\n');
        }
        return se_strbuf_failed(out);
}
