# kbulk METHOD CONTENT-TYPE: sends many requests to the API server of
# KUBE_DIR in parallel, from stdin lines `PATH<TAB>BODY`, with one curl
# process (HTTP/2, up to 32 at once). Requests the server could not take
# (5xx, 429, no answer) are sent again, up to 4 rounds in all: an API server
# under load times some out. Prints nothing; returns 1 and names the
# failures on stderr when any request did not end in 2xx.
kbulk() {
        local method=$1 ctype=$2 dir i=0 path body round
        dir=$(mktemp -d)
        (
                # shellcheck disable=SC1091
                . "$KUBE_DIR/env"
                while IFS=$'\t' read -r path body; do
                        printf '%s' "$body" >"$dir/$i"
                        printf '%s\n' "$path" >>"$dir/paths"
                        echo "$i" >>"$dir/todo"
                        i=$((i + 1))
                done
                for round in 1 2 3 4; do
                        [ -s "$dir/todo" ] || break
                        [ "$round" = 1 ] || sleep 1
                        mapfile -t todo <"$dir/todo"
                        mapfile -t paths <"$dir/paths"
                        : >"$dir/config"
                        for i in "${todo[@]}"; do
                                [ -s "$dir/config" ] && echo next >>"$dir/config"
                                printf 'url = "%s%s"\nrequest = "%s"\nheader = "Authorization: Bearer %s"\nheader = "Content-Type: %s"\ndata-binary = "@%s/%s"\noutput = "/dev/null"\ncacert = "%s"\nsilent\nshow-error\nwrite-out = "%%{http_code} %%{urlnum} %%{url}\\n"\n' \
                                        "$APISERVER_URL" "${paths[$i]}" "$method" "$ADMIN_TOKEN" "$ctype" "$dir" "$i" "$CA_FILE" >>"$dir/config"
                        done
                        curl --parallel --parallel-max 32 -K "$dir/config" >"$dir/codes" 2>"$dir/err"
                        # urlnum counts within this round's config
                        awk '$1 !~ /^2/ && ($1 ~ /^5/ || $1 == "429" || $1 == "000") { print $2 }' "$dir/codes" |
                                while read -r n; do echo "${todo[$n]}"; done >"$dir/todo"
                        grep -v '^2' "$dir/codes" | awk '$1 !~ /^5/ && $1 != "429" && $1 != "000"' >>"$dir/bad"
                done
                [ -s "$dir/todo" ] && grep -v '^2' "$dir/codes" >>"$dir/bad"
                true
        )
        local bad=
        [ -f "$dir/bad" ] && bad=$(cat "$dir/bad")
        rm -rf "$dir"
        [ -z "$bad" ] || { echo "kbulk: $(wc -l <<<"$bad") failed, e.g. $(head -1 <<<"$bad")" >&2; return 1; }
}
