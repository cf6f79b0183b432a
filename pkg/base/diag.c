/* Diagnostics for bad input (see diag.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/diag.h>

void se_diag_set(struct se_diag *diag, const char *file, unsigned line, unsigned column,
                 const char *fmt, ...)
{
        if (!diag)
                return;
        snprintf(diag->file, sizeof(diag->file), "%s", file ? file : "");
        diag->line = line;
        diag->column = column;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(diag->text, sizeof(diag->text), fmt, ap);
        va_end(ap);
        /* one line: a message never spans lines */
        for (char *p = diag->text; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
}

void se_diag_format(const struct se_diag *diag, char *buf, size_t size)
{
        if (diag->file[0] && diag->line)
                snprintf(buf, size, "%s:%u: %s", diag->file, diag->line, diag->text);
        else if (diag->file[0])
                snprintf(buf, size, "%s: %s", diag->file, diag->text);
        else
                snprintf(buf, size, "%s", diag->text);
}
