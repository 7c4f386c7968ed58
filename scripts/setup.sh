#!/usr/bin/env bash
# Installs the Debian 12 packages DEGNN needs, only those missing (a second run takes a second).
# Usage (as root): scripts/setup.sh [--test]   (--test: also NumPy and PyTorch, which the tests of
# scripts/pytorch_model.py use; without them those tests are skipped)
set -euo pipefail
packages=(cmake g++ make pkg-config ccache libcaf-dev libeigen3-dev capnproto libcapnp-dev
          libgtest-dev libgmock-dev libbenchmark-dev libmetis-dev zlib1g-dev libssl-dev
          libcpp-httplib-dev nlohmann-json3-dev libreadline-dev clang-format tmux iproute2
          nftables bc libptscotch-dev libopenmpi-dev openmpi-bin)
[ "${1:-}" = --test ] && packages+=(python3-numpy python3-torch)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
