#!/usr/bin/env bash
# Builds Debian's CAF 0.17.6 (libcaf_core, libcaf_io) with ThreadSanitizer into DIR (default
# build-tsan/caf/lib), for scripts/test.sh --tsan. Debian's libraries are not instrumented, so
# TSan cannot see CAF's own synchronisation and reports a race on nearly every message; with
# these on LD_LIBRARY_PATH (same version and soname, headers unchanged) it sees all of it.
# Takes about 15 minutes on 2 cores, once; a second run finds the libraries and returns.
# Usage (as root on Debian 12): scripts/caf_tsan.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-tsan/caf/lib}")
version=0.17.6
if [ -e "$out/libcaf_core.so.$version" ] && [ -e "$out/libcaf_io.so.$version" ]; then
  echo "$out"
  exit 0
fi
installed=$(dpkg-query -W -f='${source:Upstream-Version}' libcaf-dev 2>/dev/null || true)
if [ "$installed" != "$version" ]; then
  echo "caf_tsan: libcaf-dev $version must be installed (found '${installed:-none}')" >&2
  exit 1
fi
src=$(realpath -m build-tsan/caf/src)
mkdir -p "$src" "$out"
tarball=$src/actor-framework_$version.orig.tar.gz
if [ ! -e "$tarball" ]; then
  # The source package needs a deb-src entry; added (for Debian's own archive) if there is none.
  if ! grep -rqs "deb-src\|Types:.*deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat >/etc/apt/sources.list.d/degnn-src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  apt-get update -qq
  # Only the upstream tarball is built (a mirror here once answered 404 for Debian's packaging
  # tarball, so its failure alone is not fatal); the tarball must match the .dsc's checksum.
  (cd "$src" && apt-get source --download-only -qq "actor-framework=$version-2.1") >&2 || true
  dsc=$src/actor-framework_$version-2.1.dsc
  if [ ! -e "$tarball" ] || [ ! -e "$dsc" ]; then
    echo "caf_tsan: could not download CAF $version's source package into $src" >&2
    exit 1
  fi
  want=$(awk '/^Checksums-Sha256:/{f=1;next} f&&/orig.tar.gz/{print $1;exit}' "$dsc")
  if [ "$(sha256sum "$tarball" | cut -d' ' -f1)" != "$want" ]; then
    echo "caf_tsan: $tarball does not match the checksum in $dsc" >&2
    rm -f "$tarball"
    exit 1
  fi
fi
tree=$src/actor-framework-$version
[ -d "$tree" ] || tar -xzf "$tarball" -C "$src"
# The library's own configuration as Debian's headers declare it (caf/detail/build_config.hpp:
# log level quiet, memory management and exceptions on), C++17 as g++ 12 builds it. `-include
# limits`: upstream 0.17.6's receive_buffer.hpp uses std::numeric_limits without including
# <limits>, which g++ 12 no longer brings in through other headers.
cmake -S "$tree" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DCAF_LOG_LEVEL=QUIET \
  -DCMAKE_CXX_FLAGS="-std=c++17 -fsanitize=thread -g1 -Wno-deprecated-declarations -include limits" \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_OPENSSL=yes -DCAF_NO_TOOLS=yes \
  -DCAF_NO_PYTHON=yes -DCAF_NO_OPENCL=yes -DCAF_NO_SUMMARY=yes -DCAF_NO_COMPILER_CHECK=yes >&2
cmake --build "$src/build" -j"${DEGNN_JOBS:-$(nproc)}" --target libcaf_core_shared libcaf_io_shared >&2
for lib in core io; do
  cp -P "$src/build/lib/libcaf_$lib.so"* "$out/" 2>/dev/null ||
    cp -P "$(find "$src/build" -name "libcaf_$lib.so.$version" | head -1)" "$out/"
done
echo "$out"
