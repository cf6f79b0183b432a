# Helpers for tests that run svcenv-controller against the control plane:
# set up and clean up, start/stop controllers, read their metrics.

# ctl_setup PREFIX: a fresh namespace name $ns, Lease name $lease and scratch
# dir $work; stops kube-controller-manager so that only ours writes. On exit
# the controllers started here stop, the test's ctl_cleanup_more (if it
# defines one) runs, and $ns is deleted.
ctl_setup() {
        ns=$1-$$-$RANDOM
        lease=svcenv-controller-$ns
        work=$(mktemp -d)
        # shellcheck disable=SC1091
        . "$KUBE_DIR/env"
        trap ctl_cleanup EXIT
        "$CONTROLPLANE" stop-kcm "$KUBE_DIR" >/dev/null 2>&1
}
ctl_cleanup() {
        local f
        for f in "$work"/*.pid; do
                [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
        done
        sleep 0.5
        "$CONTROLPLANE" stop-kcm "$KUBE_DIR" >/dev/null 2>&1
        if declare -F ctl_cleanup_more >/dev/null; then ctl_cleanup_more; fi
        kapi delete "/api/v1/namespaces/$ns" >/dev/null 2>&1
        [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
eq() { [ "$("${@:2}")" = "$1" ]; } # eq WANT CMD...: CMD prints WANT (run anew on each try)
check() { # check NAME CMD...
        local name=$1
        shift
        if "$@"; then ok "$name"; else not_ok "$name"; fi
}

# start_ctl NAME [ARGS...]: runs a controller in the background; its port in
# $work/NAME.port once it serves.
start_ctl() {
        local name=$1
        shift
        "$SVCENV/svcenv-controller" --kubeconfig "$KUBE_DIR/kubeconfig" \
                --metrics-bind-address 127.0.0.1:0 --leader-elect-resource-name "$lease" \
                --leader-elect-retry-period 1 -v 2 "$@" >>"$work/$name.log" 2>&1 &
        echo $! >"$work/$name.pid"
        local i
        for i in $(seq 1 100); do
                if grep -q 'serving /metrics' "$work/$name.log"; then
                        sed -n 's/.*serving .* on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/$name.log" | tail -1 >"$work/$name.port"
                        return 0
                fi
                sleep 0.1
        done
        return 1
}
stop_ctl() { # stop_ctl NAME: SIGTERM, then wait for the exit
        local pid
        pid=$(cat "$work/$1.pid" 2>/dev/null) || return 1
        kill -TERM "$pid" 2>/dev/null
        local i
        for i in $(seq 1 150); do
                kill -0 "$pid" 2>/dev/null || { rm -f "$work/$1.pid"; return 0; }
                sleep 0.1
        done
        return 1
}
metrics() { curl -s --max-time 5 "http://127.0.0.1:$(cat "$work/$1.port")/metrics"; }
# writes NAME: successful writes the controller made
writes() { metrics "$1" | awk '/^svcenv_controller_writes_total.*result="success"/ { s += $2 } END { print s + 0 }'; }
is_leader() { metrics "$1" | grep -q '^leader_election_master_status{name="svcenv-controller"} 1'; }
