# Servers for the DNS side-by-side test and benchmark, all on loopback:
# a stand-in upstream (CoreDNS serving example.test from a zone file, NXDOMAIN
# for everything else), CoreDNS 1.15 with kubeadm v1.36's Corefile on the
# test API server, and svcenv-dns with the same options. Each listens on its
# own 127.0.53.x address (x from the PID: parallel runs do not meet) and a
# free port. Needs $work (a scratch dir) and KUBE_DIR; sets
#   UP_ADDR UP_PORT  CD_ADDR CD_PORT CD_PID  SE_ADDR SE_PORT SE_PID
# dns_stop_all stops exactly the pids started here.

DNS_PY=$(dirname "${BASH_SOURCE[0]}")/dnsparity.py
DNS_ZONE=cluster.local
dns_pids=()
_octet=$(($$ % 200 + 20))
UP_ADDR=127.0.53.$_octet
CD_ADDR=127.0.54.$_octet
SE_ADDR=127.0.55.$_octet

dns_freeport() { python3 "$DNS_PY" freeport "$1"; }

# dns_coredns_bin: the pinned CoreDNS, built on first use (minutes, cached).
dns_coredns_bin() {
        local dir
        dir=$("$(dirname "${BASH_SOURCE[0]}")/../k8s/build-coredns" 2>"$work/build-coredns.log" | tail -1) || return 1
        [ -x "$dir/coredns" ] && CD_BIN=$dir/coredns
}

_spawn() { # _spawn LOG CMD...: background, own process group; pid in $spawned
        setsid "${@:2}" </dev/null >>"$1" 2>&1 &
        spawned=$!
        dns_pids+=("$spawned")
}

# dns_start_upstream: the stand-in for the resolvers of /etc/resolv.conf.
dns_start_upstream() {
        UP_PORT=$(dns_freeport "$UP_ADDR") || return 1
        cat >"$work/db.example.test" <<'EOF'
$ORIGIN example.test.
@	300	IN	SOA	ns.example.test. hostmaster.example.test. 1 7200 1800 86400 60
@	300	IN	NS	ns.example.test.
ns	300	IN	A	192.0.2.1
www	300	IN	A	192.0.2.10
www	300	IN	A	192.0.2.11
www	300	IN	AAAA	2001:db8::10
www	300	IN	TXT	"hello from upstream"
www	300	IN	MX	10 mail.example.test.
alias	300	IN	CNAME	www.example.test.
short	10	IN	A	192.0.2.20
EOF
        cat >"$work/Corefile.upstream" <<EOF
example.test:$UP_PORT {
    bind $UP_ADDR
    file $work/db.example.test
}
.:$UP_PORT {
    bind $UP_ADDR
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
        _spawn "$work/upstream.log" "$CD_BIN" -conf "$work/Corefile.upstream"
        UP_PID=$spawned
        dns_wait_answer "$UP_ADDR" "$UP_PORT" www.example.test
}

# dns_start_coredns [TTL]: kubeadm v1.36's Corefile (cmd/kubeadm/app/phases/
# addons/dns) with what a loopback test must change: the listen address and
# port, the health/ready/metrics ports, the API server by kubeconfig, and the
# stand-in upstream in place of /etc/resolv.conf.
dns_start_coredns() {
        local hp rp mp
        CD_PORT=$(dns_freeport "$CD_ADDR") || return 1
        hp=$(dns_freeport 127.0.0.1) && rp=$(dns_freeport 127.0.0.1) && mp=$(dns_freeport 127.0.0.1) || return 1
        CD_READY=http://127.0.0.1:$rp/ready CD_METRICS=http://127.0.0.1:$mp/metrics
        cat >"$work/Corefile" <<EOF
.:$CD_PORT {
    bind $CD_ADDR
    errors
    health 127.0.0.1:$hp {
       lameduck 5s
    }
    ready 127.0.0.1:$rp
    kubernetes $DNS_ZONE in-addr.arpa ip6.arpa {
       kubeconfig $KUBE_DIR/kubeconfig
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus 127.0.0.1:$mp
    forward . $UP_ADDR:$UP_PORT {
       max_concurrent 1000
    }
    cache 30 {
       disable success $DNS_ZONE
       disable denial $DNS_ZONE
    }
    loop
    reload
    loadbalance
}
EOF
        _spawn "$work/coredns.log" "$CD_BIN" -conf "$work/Corefile"
        CD_PID=$spawned
        until_ok 60 curl -sf -o /dev/null "$CD_READY"
}

# dns_start_svcenv: svcenv-dns with the options of the Corefile above
# (health, ready and metrics all on one port: each answers every path).
dns_start_svcenv() {
        local hp
        SE_PORT=$(dns_freeport "$SE_ADDR") || return 1
        hp=$(dns_freeport 127.0.0.1) || return 1
        SE_READY=http://127.0.0.1:$hp/ready SE_METRICS=http://127.0.0.1:$hp/metrics
        _spawn "$work/svcenv-dns.log" "$SVCENV/svcenv-dns" --kubeconfig "$KUBE_DIR/kubeconfig" \
                --listen "$SE_ADDR:$SE_PORT" --ready-addr "127.0.0.1:$hp" --health-addr "" \
                --metrics-addr "" --zone "$DNS_ZONE" --ttl 30 --pods insecure \
                --reverse-fallthrough --upstream "$UP_ADDR:$UP_PORT" --cache-ttl 30
        SE_PID=$spawned
        until_ok 60 curl -sf -o /dev/null "$SE_READY"
}

# dns_wait_answer ADDR PORT NAME: NAME resolves (NOERROR) within 30 s.
dns_wait_answer() {
        until_ok 30 sh -c "dig @$1 -p $2 +tries=1 +time=1 '$3' A | grep -q 'status: NOERROR'"
}

# dns_dig ADDR PORT QUERIES OUT udp|tcp: every query of the file, in order.
dns_dig() {
        local t=+ignore
        [ "$5" = tcp ] && t=+tcp
        dig -f "$3" @"$1" -p "$2" +nocookie +tries=1 +time=3 $t >"$4" 2>&1
}

dns_stop_all() {
        local p
        for p in "${dns_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
        for p in "${dns_pids[@]}"; do
                for _ in $(seq 1 100); do
                        kill -0 "$p" 2>/dev/null || break
                        sleep 0.1
                done
                kill -KILL -- "-$p" 2>/dev/null
        done
        dns_pids=()
}
