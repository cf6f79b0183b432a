# banned.h makes the banned libc calls compile errors (see its comment).
. "$(dirname "$0")/lib.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}

# banned.h, force-included as the Makefile does, before the source's own
# libc includes: a banned call is a compile error, its safe neighbour is not.
for call in 'strcpy(d, s)' 'sprintf(d, "%s", s)' 'strtok(d, s)' 'atoi(s)' 'system(s)'; do
        printf '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\nlong f(char *d, const char *s);\nlong f(char *d, const char *s)\n{\n        return (long)%s;\n}\n' "$call" >"$tmp/b.c"
        if ! out=$($cc -std=gnu11 -D_GNU_SOURCE -O2 -D_FORTIFY_SOURCE=3 -Iinclude -include svcenv/banned.h \
                -c -o "$tmp/b.o" "$tmp/b.c" 2>&1) && grep -q "sorry_${call%%(*}_is_banned" <<<"$out"; then
                ok "banned.h: ${call%%(*} does not compile"
        else
                not_ok "banned.h: ${call%%(*} does not compile"
        fi
done
printf '#include <stdio.h>\n#include <string.h>\nint f(char *d, const char *s);\nint f(char *d, const char *s)\n{\n        return snprintf(d, 8, "%%s", s) + (int)strlen(s);\n}\n' >"$tmp/b.c"
if $cc -std=gnu11 -D_GNU_SOURCE -O2 -D_FORTIFY_SOURCE=3 -Wall -Werror -Iinclude -include svcenv/banned.h \
        -c -o "$tmp/b.o" "$tmp/b.c"; then
        ok "banned.h: snprintf and strlen still compile"
else
        not_ok "banned.h: snprintf and strlen still compile"
fi
echo "1..$n"
