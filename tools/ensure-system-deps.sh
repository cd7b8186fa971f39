#!/usr/bin/env bash
# System packages the tests and benchmarks use, installed with apt-get only when missing:
#   kafkacat      Debian's package of kcat (librdkafka's CLI); tests skip without it
#   redis-server  benchmarks only (best effort)
#   iperf3        benchmarks only (best effort)
#   nftables      the stalled-connection test drops packets in a namespace it makes (as root)
# Never fails the build: when apt-get is missing or fails it prints a warning and exits 0, and the
# tests that need the tool skip with a reason. Non-interactive (works as root, CI=true, no stdin).
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive

warn() { echo "ensure-system-deps: WARNING: $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }
have_kcat() { have kcat || have kafkacat; }

# Debian's kafkacat ships /usr/bin/kafkacat (newer builds also kcat); make `kcat` resolve too.
link_kcat() {
    if ! have kcat && have kafkacat && [[ -w /usr/local/bin ]]; then
        ln -sf "$(command -v kafkacat)" /usr/local/bin/kcat && echo "system deps: linked kcat -> kafkacat"
    fi
}

missing=()
have_kcat || missing+=(kafkacat)
have redis-server || missing+=(redis-server)
have iperf3 || missing+=(iperf3)
have nft || missing+=(nftables)

if [[ ${#missing[@]} -eq 0 ]]; then
    link_kcat
    echo "system deps: kcat, redis-server, iperf3, nft already installed"
    exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    if have sudo && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        warn "missing ${missing[*]} and not root (no passwordless sudo); tests needing them will skip"
        exit 0
    fi
fi
if ! have apt-get; then
    warn "missing ${missing[*]} and apt-get is not available; tests needing them will skip"
    exit 0
fi

APT=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=300
     -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

echo "system deps: installing ${missing[*]} with apt-get"
LOG="$(mktemp /tmp/ensure-system-deps.XXXXXX.log)"
if ! "${APT[@]}" update -qq </dev/null >"$LOG" 2>&1; then
    warn "apt-get update failed (see below); trying to install from the existing package lists"
    tail -n 5 "$LOG" >&2
fi
apt_install() {  # one package at a time, so a benchmark-only failure cannot block kafkacat
    "${APT[@]}" install --no-install-recommends "$1" </dev/null >>"$LOG" 2>&1
}
for pkg in "${missing[@]}"; do
    if apt_install "$pkg"; then
        echo "system deps: installed $pkg"
    elif [[ $pkg == kafkacat ]]; then
        warn "apt-get install kafkacat failed; kcat tests will skip. Last lines of the apt-get log:"
        tail -n 5 "$LOG" >&2
    else
        warn "apt-get install $pkg failed (benchmarks only; continuing)"
    fi
done
rm -f "$LOG"
link_kcat
exit 0
