# Helpers for tests that run svcenv-controller against the control plane:
# start/stop controllers, read their metrics. Needs $work, $lease, $KUBE_DIR.
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
