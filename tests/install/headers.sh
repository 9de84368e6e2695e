#!/usr/bin/env bash
# Installs the build into a temporary prefix and compiles every installed header on its own (a .cpp that
# includes only it) in a consumer project found through find_package(attograd), at -std=c++17 with
# -Wall -Wextra -Wpedantic -Werror: each header includes what it uses and is warning-free for users.
# Usage: headers.sh BUILD_DIR [CMAKE]
set -euo pipefail
build=$(cd "$1" && pwd)
cmake=${2:-cmake}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quiet() {
  "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log"; echo "FAILED: $*"; exit 1; }
}
quiet "$cmake" --install "$build" --prefix "$tmp/prefix"
quiet "$cmake" -S "$here/headers" -B "$tmp/headers" -DCMAKE_PREFIX_PATH="$tmp/prefix"
quiet "$cmake" --build "$tmp/headers" -j2
n=$(find "$tmp/prefix/include/attograd" -name '*.h' | wc -l)
[ "$n" -gt 30 ] || { echo "FAILED: only $n headers installed"; exit 1; }
echo "install/headers: $n installed headers compile on their own"
