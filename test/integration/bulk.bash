# kbulk METHOD CONTENT-TYPE: sends many requests to the API server of
# KUBE_DIR in parallel, from stdin lines `PATH<TAB>BODY`, with one curl
# process (HTTP/2, up to 32 at once). Prints nothing; returns 1 and names
# the failures on stderr when any request did not answer 2xx.
kbulk() {
        local method=$1 ctype=$2 dir i=0 path body
        dir=$(mktemp -d)
        (
                # shellcheck disable=SC1091
                . "$KUBE_DIR/env"
                while IFS=$'\t' read -r path body; do
                        printf '%s' "$body" >"$dir/$i"
                        [ $i -gt 0 ] && echo next
                        printf 'url = "%s%s"\nrequest = "%s"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: %s"\ndata-binary = "@%s/%s"\noutput = "/dev/null"\ncacert = "%s"\nsilent\nshow-error\nwrite-out = "%%{http_code} %%{url}\\n"\n' \
                                "$APISERVER_URL" "$path" "$method" "$ADMIN_TOKEN" "$ctype" "$dir" "$i" "$CA_FILE"
                        i=$((i + 1))
                done >"$dir/config"
                curl --parallel --parallel-max 32 -K "$dir/config" >"$dir/codes" 2>"$dir/err"
        )
        local bad
        bad=$(grep -v '^2' "$dir/codes")
        rm -rf "$dir"
        [ -z "$bad" ] || { echo "kbulk: $(wc -l <<<"$bad") failed, e.g. $(head -1 <<<"$bad")" >&2; return 1; }
}
