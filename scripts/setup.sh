#!/usr/bin/env bash
# Installs every build, test and testbed dependency of fathom from Debian's
# package registry. Idempotent: packages already installed are skipped, and
# apt is not touched at all when nothing is missing.
set -euo pipefail

PKGS=(
  # toolchain
  g++ cmake ninja-build clang clang-format libclang-rt-14-dev pkg-config git
  # RDMA userspace (rdma-core) and perftest
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core ibverbs-utils perftest
  # libraries
  libboost-dev libprotobuf-dev protobuf-compiler libgtest-dev libgmock-dev
  libbenchmark-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libpcap-dev zlib1g-dev
  nlohmann-json3-dev
  # live emulation's DPDK data path (Debian 12 ships dpdk-testpmd, which its
  # benchmark runs, in dpdk-dev) and
  # distributed simulation on MPI (issues 29, 30)
  libdpdk-dev dpdk dpdk-dev libopenmpi-dev openmpi-bin
  # replay's HTML report, rendered in a real headless browser in tests
  chromium chromium-driver
  # capture dissection in tests
  tshark
  # renders `fathom topo --dot` in tests/topo (skipped without it)
  graphviz
  # real rxe testbed: qemu VMs with a stock Debian kernel and a busybox initramfs
  qemu-system-x86 busybox-static kmod cpio
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no, non-interactively.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
