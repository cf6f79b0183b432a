#!/usr/bin/env bash
# The userspace proxy with its redirect rules written for nftables (see proxy-userspace.bash).
PROXY_BACKEND=nftables exec bash "$(dirname "$0")/proxy-userspace.bash"
