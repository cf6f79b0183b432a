# Helpers for CLI tests: TAP output, golden comparison, exit codes.
# SVCENV (the bin folder) is set by test/run-all.
set -uo pipefail
: "${SVCENV:=$PWD/build/bin}"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; }
# check NAME CMD...: ok when CMD succeeds
check() {
        local name=$1
        shift
        if "$@"; then ok "$name"; else not_ok "$name"; fi
}
# until_ok SECONDS CMD...: retries CMD every 0.2 s until it succeeds or time runs out.
until_ok() {
        local deadline=$((SECONDS + $1))
        shift
        until "$@"; do
                [ $SECONDS -ge $deadline ] && return 1
                sleep 0.2
        done
}

# golden NAME FILE CMD...: stdout of CMD must equal FILE (UPDATE_GOLDEN=1 rewrites it).
golden() {
        local name=$1 file=$2
        shift 2
        local out
        out=$("$@" 2>&1)
        local rc=$?
        if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
                printf '%s\n' "$out" >"$file"
        fi
        if [ $rc -eq 0 ] && diff -u "$file" <(printf '%s\n' "$out") >/tmp/svcenv-golden.diff 2>&1; then
                ok "$name"
        else
                not_ok "$name (exit $rc)"
                sed 's/^/# /' /tmp/svcenv-golden.diff | head -40
        fi
}

# fails_with NAME CODE EXPECTED_STDERR CMD...: CMD exits CODE and prints exactly that one line.
fails_with() {
        local name=$1 code=$2 want=$3
        shift 3
        local err rc
        err=$("$@" 2>&1 >/dev/null)
        rc=$?
        if [ "$rc" -eq "$code" ] && [ "$err" = "$want" ]; then
                ok "$name"
        else
                not_ok "$name"
                echo "#   exit $rc (want $code)"
                echo "#   got:  $err"
                echo "#   want: $want"
        fi
}
