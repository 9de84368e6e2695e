#!/usr/bin/env bash
# Installs the build into a temporary prefix and, as a user would, builds the three examples/ against it
# out of tree (each its own CMake project, warnings as errors, no -march flag) and runs them:
#   mlp_xor's final loss is below 0.01 and it gets XOR right;
#   custom_op's gradient check passes (exit 0), built with CMake and again with attograd.pc's flags;
#   read_run, on a run folder trained here by the installed attograd program (tiny model, 30 steps),
#   prints an attention pattern whose rows each sum to 1 within 1e-3 (4 printed decimals).
# Also checks that README.md shows examples/mlp_xor/main.cpp as it is, and that no imported target carries
# compile options (so -march=native cannot leak to consumers).
# Usage: examples.sh BUILD_DIR [CMAKE]
set -euo pipefail
build=$(cd "$1" && pwd)
cmake=${2:-cmake}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs a command quietly; on failure prints its output and fails the test.
quiet() {
  "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log"; echo "FAILED: $*"; exit 1; }
}
fail() {
  echo "FAILED: $*"
  exit 1
}

# The README shows example 1 whole: it must be the file that is built here.
awk '/^## Use it as a library/ { sec = 1 } sec && /^```cpp$/ { on = 1; next } on && /^```$/ { exit } on' \
  "$src/README.md" | diff - "$src/examples/mlp_xor/main.cpp" >/dev/null ||
  fail "README.md's \"Use it as a library\" code differs from examples/mlp_xor/main.cpp"

prefix=$tmp/prefix
quiet "$cmake" --install "$build" --prefix "$prefix"
targets=$(echo "$prefix"/lib*/cmake/attograd/attogradTargets.cmake)
[ -f "$targets" ] || fail "no attogradTargets.cmake under $prefix"
! grep -n "INTERFACE_COMPILE_OPTIONS\|march" "$targets" || fail "$targets passes compile options to consumers"

for ex in mlp_xor custom_op read_run; do
  quiet "$cmake" -S "$src/examples/$ex" -B "$tmp/$ex" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror"
  quiet "$cmake" --build "$tmp/$ex" -j2
done

# 1. The MLP learns XOR.
"$tmp/mlp_xor/mlp_xor" | tee "$tmp/mlp.out"
awk '/^final loss/ { found = 1; if ($3 < 0.01) ok = 1 } END { exit !(found && ok) }' "$tmp/mlp.out" ||
  fail "mlp_xor: final loss not below 0.01"
grep -q "^1 xor 1 -> 0" "$tmp/mlp.out" && grep -q "^0 xor 1 -> 1" "$tmp/mlp.out" ||
  fail "mlp_xor: wrong XOR predictions"

# 2. The custom op's gradient check (its exit code is the verdict).
"$tmp/custom_op/custom_op" || fail "custom_op: gradient check over tolerance"

# 2b. The same example through pkg-config instead of CMake.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
flags=$(PKG_CONFIG_PATH="$(dirname "$targets")/../../pkgconfig" pkg-config --cflags --libs attograd) ||
  fail "pkg-config does not find attograd.pc"
quiet "${cxx:-c++}" -std=c++17 -O1 -Wall -Wextra -Wpedantic -Werror "$src/examples/custom_op/main.cpp" \
  -o "$tmp/custom_op_pc" $flags
"$tmp/custom_op_pc" >/dev/null || fail "custom_op built with pkg-config: gradient check over tolerance"

# 3. A tiny run, trained by the installed program, read back with hooks.
cat >"$tmp/tiny.json" <<'JSON'
{"name": "tiny", "seed": 3,
 "task": {"kind": "reverse", "vocab": 5, "length": 4},
 "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32},
 "train": {"steps": 30, "batch_size": 16, "lr": 0.01, "warmup": 5, "threads": 1, "eval_every": 30,
           "log_every": 10, "eval_size": 32},
 "output": {"dir": "runs/tiny", "attention_every": 0, "probes": 1, "checkpoint_every": 0}}
JSON
quiet "$prefix/bin/attograd" train "$tmp/tiny.json" --out "$tmp/run"
"$tmp/read_run/read_run" "$tmp/run" 0 1 | tee "$tmp/read.out"
awk -F'|' '/^row / { n++; s = 0; k = split($2, v, " "); for (i = 1; i <= k; i++) s += v[i];
                     if (s < 0.999 || s > 1.001) { print "row " n - 1 " sums to " s; bad = 1 } }
           END { exit !(n == 9 && !bad) }' "$tmp/read.out" ||
  fail "read_run: expected 9 pattern rows, each summing to 1"
grep -q "^top predictions" "$tmp/read.out" || fail "read_run: no predictions printed"
echo "install/examples: all three examples built against the installed package and passed"
