# svcenv rules with Services routed to the userspace proxy by annotation: no
# kube-proxy rules for them, the redirect rules after kube-proxy's.
. "$(dirname "$0")/lib.bash"
c=test/golden/proxy/routed.yaml
g=test/golden/proxy
golden "routed Services, iptables: redirects after kube-proxy's rules" $g/routed.iptables \
        "$SVCENV/svcenv" rules -f $c --node n1 --ip-family ipv4 --random-fully off

# the two parts of the output: kube-proxy's rules, then the redirects
split() { sed -n "/^# svcenv userspace proxy/q;p" <<<"$1"; }
redirects() { sed -n '/^# svcenv userspace proxy/,$p' <<<"$1"; }
ipt=$("$SVCENV/svcenv" rules -f $c --node n1 --ip-family ipv4)
nft=$("$SVCENV/svcenv" rules -f $c --node n1 --ip-family ipv4 --backend nftables)
check "iptables: no kernel rules for the routed services" \
        bash -c '! grep -qE "ns/(least|retried|hashed)|172\.30\.0\.[234]|30002" <<<"$1"' _ "$(split "$ipt")"
check "iptables: the unannotated service keeps its rules" \
        grep -q -- '-d 172.30.0.5 --dport 80 -j KUBE-SVC-' <<<"$(split "$ipt")"
check "iptables: ClusterIP, externalIP and NodePort redirected, UDP by TPROXY" \
        bash -c 'grep -q -- "-d 172.30.0.2/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 10262" <<<"$1" &&
                grep -q -- "-d 192.0.2.3/32 -p tcp -m tcp --dport 80 -j REDIRECT" <<<"$1" &&
                grep -q -- "--dport 30002 -j REDIRECT --to-ports 10262" <<<"$1" &&
                grep -q -- "-d 172.30.0.2/32 -p udp -m udp --dport 53 -j TPROXY" <<<"$1" &&
                grep -q -- "-d 172.30.0.4/32 -p tcp -m tcp --dport 80 -j REDIRECT" <<<"$1" &&
                ! grep -q 172.30.0.5 <<<"$1"' _ "$(redirects "$ipt")"
check "nftables: sh in the kernel, lc and retry redirected" \
        bash -c 'grep -q "172.30.0.4 . tcp . 80" <<<"$1" && ! grep -qE "ns/(least|retried)|172\.30\.0\.[23]" <<<"$1" &&
                grep -q "ip daddr 172.30.0.3 tcp dport 80 redirect to :10262" <<<"$2" &&
                ! grep -q "172.30.0.4" <<<"$2"' _ "$(split "$nft")" "$(redirects "$nft")"
check "nothing routed: no redirect section" \
        bash -c '! "$1/svcenv" rules -f manifests/examples/demo-cluster.yaml --node node-a | grep -q "svcenv userspace proxy"' _ "$SVCENV"
echo "1..$n"
