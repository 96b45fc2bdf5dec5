#!/usr/bin/env bash
# Installs everything moqd needs to build and test. Idempotent: installs only what is missing.
# Debian 12 packages only; Node 20 and npm come with the machine (never install them with apt).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build g++ clang-14 libclang-rt-14-dev
  libexpected-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libtomlplusplus-dev libgnutls28-dev pkg-config valgrind heaptrack ccache
  chromium
  libjwt-gnutls-dev libjansson-dev libsystemd-dev python3-prometheus-client curl openssl
  iproute2
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ngtcp2 1.11 and nghttp3 1.8 from bookworm-backports, pinned with -t for these packages alone
# (backports has priority 100, so nothing else moves). Installs only when a package is missing or
# older than the version moqd's CMakeLists.txt requires.
backports=(libngtcp2-dev:1.11 libngtcp2-crypto-gnutls-dev:1.11 libnghttp3-dev:1.8)
stale=()
for entry in "${backports[@]}"; do
  p=${entry%%:*} min=${entry#*:}
  # dpkg-query fails for a package the machine has never heard of: that is "missing", not an error.
  v=$({ dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null || true; } |
      sed -n 's/^install ok installed //p')
  if [[ -z "$v" ]] || ! dpkg --compare-versions "$v" ge "$min"; then
    stale+=("$p")
  fi
done
if ((${#stale[@]})); then
  if ! grep -rqsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    # The same mirror as the existing bookworm entry (deb822 or one-line format).
    mirror=$(grep -hsE '^[^#]*https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/debian.sources \
             /etc/apt/sources.list | grep -oE 'https?://[^ ]+/debian' | head -n1 || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "setup: enabling bookworm-backports from $mirror"
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s\n' \
      "$mirror" /usr/share/keyrings/debian-archive-keyring.gpg \
      >/etc/apt/sources.list.d/backports.sources
  fi
  echo "setup: installing ${stale[*]} from bookworm-backports"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends -t bookworm-backports "${stale[@]}"
fi

node_major=$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/' || echo 0)
if [[ "${node_major:-0}" -lt 20 ]]; then
  echo "setup: Node.js >= 20 is required (found: $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi
if [[ -f tests/interop/package-lock.json ]]; then
  stamp=tests/interop/node_modules/.lock-stamp
  if [[ ! -f "$stamp" ]] || ! cmp -s tests/interop/package-lock.json "$stamp"; then
    (cd tests/interop && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/interop/package-lock.json "$stamp"
  fi
fi
if [[ -f tests/browser/package-lock.json ]]; then
  stamp=tests/browser/node_modules/.lock-stamp
  if [[ ! -f "$stamp" ]] || ! cmp -s tests/browser/package-lock.json "$stamp"; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/browser/package-lock.json "$stamp"
  fi
fi
