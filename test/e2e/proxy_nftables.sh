#!/usr/bin/env bash
# Real traffic through `svcenv rules --apply --backend nftables` (see proxy-traffic.bash).
PROXY_BACKEND=nftables exec bash "$(dirname "$0")/proxy-traffic.bash"
