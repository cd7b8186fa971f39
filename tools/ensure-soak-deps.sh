#!/usr/bin/env bash
# What `make soak` needs beyond the suite (tests/chaos/README.md), installed with apt-get
# only when missing: nft (nftables: partitions and packet loss), ip and tc (iproute2: network
# namespaces, veth, tbf), mkfs.ext4 and losetup (e2fsprogs, mount: a disk per broker).
# The soak makes namespaces and mounts: it needs root.
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
have() { command -v "$1" >/dev/null 2>&1; }

if [[ $(id -u) -ne 0 ]]; then
    echo "ensure-soak-deps: the soak makes network namespaces and mounts: run it as root" >&2
    exit 1
fi
missing=()
have nft || missing+=(nftables)
{ have ip && have tc; } || missing+=(iproute2)
have mkfs.ext4 || missing+=(e2fsprogs)
have losetup || missing+=(mount)
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "soak deps: nft, ip, tc, mkfs.ext4, losetup already installed"
    exit 0
fi
echo "soak deps: installing ${missing[*]} with apt-get"
if ! { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }; then
    echo "ensure-soak-deps: apt-get install ${missing[*]} failed; install them and retry" >&2
    exit 1
fi
