# test/check-layers fails when a rule of pkg/README.md is broken: it runs on a
# copy of the tree with one violation at a time.
. "$(dirname "$0")/lib.bash"
: "${SVCENV_BUILD:=$PWD/build}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}

# The copy: sources, headers, the doc; objects copied so that new ones can be
# added beside them.
src=$tmp/src
mkdir -p "$src/test" "$src/build/obj"
cp -r pkg cmd include "$src/"
cp test/check-layers "$src/test/"
cp -r "$SVCENV_BUILD/obj/pkg" "$SVCENV_BUILD/obj/cmd" "$src/build/obj/"
objflags="-std=gnu11 -D_GNU_SOURCE -Iinclude"

# expect NAME PATTERN: check-layers on the copy fails and says PATTERN.
expect() {
        local name=$1 pattern=$2 out rc=0
        out=$(cd "$src" && BUILD=build test/check-layers 2>&1) || rc=$?
        if [ $rc -ne 0 ] && grep -qE -- "$pattern" <<<"$out"; then
                ok "$name"
        else
                not_ok "$name"
                echo "# exit $rc, wanted /$pattern/, got:"
                sed 's/^/#   /' <<<"$out" | head -n 10
        fi
}
# with FILE CMD...: runs CMD (a change to the copy), then restores FILE.
save() { cp "$src/$1" "$tmp/saved"; }
restore() { cp "$tmp/saved" "$src/$1"; }

if out=$(cd "$src" && BUILD=build test/check-layers 2>&1); then
        ok "the unchanged copy passes"
else
        not_ok "the unchanged copy passes"
        sed 's/^/#   /' <<<"$out" | head -n 10
fi

# The table is read from the doc: take endpoints from proxy's uses and the
# includes and symbol uses proxy already has become violations.
save pkg/README.md
sed -i -E 's/^(\| `proxy` \| `base` `model`) `endpoints`/\1/' "$src/pkg/README.md"
expect "the doc's table drives the include check" \
        'pkg/proxy/.* includes svcenv/endpoints\.h \(of endpoints\), which pkg/proxy may not use'
expect "the doc's table drives the nm check" 'pkg/proxy/.*\.c uses se_[a-z_]+ of pkg/endpoints, which pkg/proxy may not use'
restore pkg/README.md

save pkg/README.md
sed -i '/^| `httpd` |/d' "$src/pkg/README.md"
expect "a pkg without a row fails" 'pkg/httpd has no row'
expect "a public header without an owner fails" 'include/svcenv/httpd\.h belongs to no pkg'
restore pkg/README.md

save pkg/README.md
sed -i -E 's/^(\| `envvars` \| [^|]*\| `envvars`)/\1 `envvars_gone`/' "$src/pkg/README.md"
expect "a header in the table but not in include/ fails" 'lists envvars_gone\.h for envvars, but include/svcenv/envvars_gone\.h does not exist'
restore pkg/README.md

save pkg/envvars/list.c
sed -i '0,/^#include/s//#include <svcenv\/kube.h>\n&/' "$src/pkg/envvars/list.c"
expect "an include of a pkg not used fails" 'pkg/envvars/list\.c includes svcenv/kube\.h \(of kube\)'
restore pkg/envvars/list.c

save pkg/envvars/list.c
sed -i '0,/^#include/s//#include "..\/model\/decode_internal.h"\n&/' "$src/pkg/envvars/list.c"
expect "another pkg's private header fails" 'pkg/envvars/list\.c includes "\.\./model/decode_internal\.h": another folder'
restore pkg/envvars/list.c

save cmd/svcenv/main.c
sed -i '0,/^#include/s//#include "..\/..\/pkg\/model\/ptab_internal.h"\n&/' "$src/cmd/svcenv/main.c"
expect "cmd/ including a pkg header fails" 'cmd/svcenv/main\.c includes "\.\./\.\./pkg/model/ptab_internal\.h"'
restore cmd/svcenv/main.c

# Objects: a symbol taken by a hand-written declaration instead of a header.
cat >"$src/pkg/envvars/sneak.c" <<'EOF'
int se_kube_client_free(void *c);
void *envvars_sneak(void *c);
void *envvars_sneak(void *c)
{
        return (void *)(long)se_kube_client_free(c);
}
EOF
(cd "$src" && $cc $objflags -c -o build/obj/pkg/envvars/sneak.o pkg/envvars/sneak.c)
expect "nm: a symbol of a pkg not used fails" 'pkg/envvars/sneak\.c uses se_kube_client_free of pkg/kube, which pkg/envvars may not use'
rm -f "$src/pkg/envvars/sneak.c" "$src/build/obj/pkg/envvars/sneak.o"

cat >"$src/cmd/svcenv/sneak.c" <<'EOF'
#include <stddef.h>
void model_intern_pool_stats(size_t *ret_strings, size_t *ret_bytes);
size_t cmd_sneak(void);
size_t cmd_sneak(void)
{
        size_t n, b;
        model_intern_pool_stats(&n, &b);
        return n + b;
}
EOF
(cd "$src" && $cc $objflags -c -o build/obj/cmd/svcenv/sneak.o cmd/svcenv/sneak.c)
expect "nm: cmd/ using a pkg-internal symbol fails" 'cmd/svcenv/sneak\.c uses model_intern_pool_stats, internal to pkg/model'
rm -f "$src/cmd/svcenv/sneak.c" "$src/build/obj/cmd/svcenv/sneak.o"

cat >"$src/pkg/model/sneak.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
char *model_sneak(const char *s);
char *model_sneak(const char *s)
{
        char *p = malloc(strlen(s) + 1);
        return p ? memcpy(p, s, strlen(s) + 1) : NULL;
}
int unprefixed_helper(void);
int unprefixed_helper(void)
{
        return 1;
}
EOF
(cd "$src" && $cc $objflags -O2 -c -o build/obj/pkg/model/sneak.o pkg/model/sneak.c)
expect "nm: malloc outside the allocator fails" 'pkg/model/sneak\.c calls malloc: allocate with se_'
expect "nm: an unprefixed global fails" 'pkg/model/sneak\.c defines global unprefixed_helper: name it se_\* \(public\) or model_\*'
rm -f "$src/pkg/model/sneak.c" "$src/build/obj/pkg/model/sneak.o"

echo "1..$n"
