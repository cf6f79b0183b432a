#!/usr/bin/env bash
# Per-Service routing with nftables (see proxy-route.bash).
PROXY_BACKEND=nftables exec bash "$(dirname "$0")/proxy-route.bash"
