#!/usr/bin/env bash
# Real traffic through `svcenv rules --apply --backend iptables` (see proxy-traffic.bash).
PROXY_BACKEND=iptables exec bash "$(dirname "$0")/proxy-traffic.bash"
