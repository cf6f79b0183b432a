#!/usr/bin/env bash
# The userspace proxy with its redirect rules written for iptables (see proxy-userspace.bash).
PROXY_BACKEND=iptables exec bash "$(dirname "$0")/proxy-userspace.bash"
