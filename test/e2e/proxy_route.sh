#!/usr/bin/env bash
# Per-Service routing with iptables (see proxy-route.bash).
PROXY_BACKEND=iptables exec bash "$(dirname "$0")/proxy-route.bash"
