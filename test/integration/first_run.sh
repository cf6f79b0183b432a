#!/usr/bin/env bash
# The README's first command on a fresh machine: a copy of the tree where the
# Debian packages look missing (dpkg-query and pkg-config find nothing until
# apt-get "installs" them) must do the set-up and then the job in one `make`,
# with no "run make again". apt-get is a stand-in that only records its
# arguments and then lets the real packages be seen: nothing is installed or
# downloaded. Needs no control plane; it lives here because it builds a
# whole tree, which the sanitizer runs of the cli suite need not repeat.
. "$(dirname "${BASH_SOURCE[0]}")/../cli/lib.bash"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
        # test/ensure-deps only runs apt-get as root; otherwise it prints the command
        echo "ok 1 # SKIP first run: test/ensure-deps installs only as root"
        exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree" "$tmp/fake"
tar -C "$repo" --exclude=./build --exclude=./.git -cf - . | tar -C "$tmp/tree" -xf -
installed=$tmp/installed

# pkg-config and dpkg-query see nothing until apt-get has run
for tool in pkg-config dpkg-query; do
        real=$(command -v "$tool")
        cat >"$tmp/fake/$tool" <<EOF
#!/bin/sh
[ -e "$installed" ] && exec "$real" "\$@"
exit 1
EOF
done
cat >"$tmp/fake/apt-get" <<EOF
#!/bin/sh
echo "apt-get \$*" >>"$tmp/apt.log"
[ "\$1" = install ] || [ "\$2" = install ] || [ "\$3" = install ] && touch "$installed"
exit 0
EOF
chmod +x "$tmp/fake/"*
fresh_make() { PATH="$tmp/fake:$PATH" make -C "$tmp/tree" --no-print-directory -j2 "$@"; }

out=$(fresh_make demo 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q 'install.*libjansson-dev' "$tmp/apt.log" 2>/dev/null; then
        ok "make demo on a fresh machine installs the packages"
else
        not_ok "make demo on a fresh machine installs the packages (exit $rc)"
        printf '%s\n' "$out" | tail -n 15 | sed 's/^/# /'
fi
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q 'KUBERNETES_SERVICE_HOST=' &&
        ! printf '%s\n' "$out" | grep -q 'run make again'; then
        ok "the same make demo then runs the demo"
else
        not_ok "the same make demo then runs the demo"
        printf '%s\n' "$out" | tail -n 15 | sed 's/^/# /'
fi

# Packages gone again after a build: the leftover stamp must not stop the
# install (it is remade each time packages are missing), and the target runs.
rm -f "$installed" "$tmp/apt.log"
out=$(fresh_make hdr-check 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/apt.log" ] && printf '%s\n' "$out" | grep -q 'headers compile'; then
        ok "a second fresh-machine make (hdr-check) installs again and runs"
else
        not_ok "a second fresh-machine make (hdr-check) installs again and runs (exit $rc)"
        printf '%s\n' "$out" | tail -n 15 | sed 's/^/# /'
fi

# make clean needs no packages and installs none
rm -f "$installed" "$tmp/apt.log"
if fresh_make clean >/dev/null 2>&1 && [ ! -e "$tmp/apt.log" ]; then
        ok "make clean installs nothing"
else
        not_ok "make clean installs nothing"
fi
