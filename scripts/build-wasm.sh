#!/usr/bin/env bash
# Builds every WebAssembly module of the repository and puts each where its user looks
# for it:
#
#   plugins/<bin>/<bin>.wasm       each Rust plugin, wasm32-wasip1 (next to its tool.toml)
#   plugins/wc/wc.wasm             the C plugin, clang + wasi-libc
#   tests/modules/<bin>.wasm       each bin of airlock-hostile (tests/hostile), wasm32-wasip1,
#                                  or wasm32-wasip2 for the bins listed in
#                                  tests/hostile/wasip2-bins.txt
#   tests/modules/read_file_p2.wasm  read_file as a wasm32-wasip2 component
#
# Installs what it needs first (the Rust wasm targets, Debian's clang/wasi-libc), so a
# fresh machine needs nothing else. Runs from any directory, is safe to re-run, and
# prints one line per module; cargo and clang only speak up on warnings or errors.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

readonly PROFILE=wasm
readonly HOSTILE_PACKAGE=airlock-hostile
readonly WASIP2_LIST=tests/hostile/wasip2-bins.txt

# shellcheck source=scripts/common.sh
source scripts/common.sh

# Prints "<package> <bin> <manifest dir>" for every bin target of the workspace, then
# the target directory on a line "target-dir <path>".
workspace_bins() {
    cargo metadata --no-deps --format-version 1 | python3 -c '
import json, os, sys
metadata = json.load(sys.stdin)
for package in metadata["packages"]:
    for target in package["targets"]:
        if "bin" in target["kind"]:
            print(package["name"], target["name"], os.path.dirname(package["manifest_path"]))
print("target-dir", metadata["target_directory"])
'
}

# The first bytes of a core module and of a component: the magic, then the version
# (1 for modules; 0x0d with layer 1 for components).
readonly CORE_MODULE_HEADER="0061736d01000000"
readonly COMPONENT_HEADER="0061736d0d000100"

# check_module FILE HEADER: FILE is non-empty WebAssembly of the expected kind.
check_module() {
    local file="$1" expected="$2" header
    [[ -s $file ]] || die "$file is empty or missing"
    header="$(od -An -tx1 -N8 "$file" | tr -d ' \n')"
    [[ $header == "$expected" ]] || die "$file is not the expected WebAssembly (header $header)"
}

# place SOURCE DEST HEADER WHAT: copies a built module into place (only when it changed,
# so a re-run leaves timestamps alone) and reports it.
place() {
    local source="$1" dest="$2" header="$3" what="$4"
    check_module "$source" "$header"
    mkdir -p "$(dirname "$dest")"
    cmp -s "$source" "$dest" 2>/dev/null || cp "$source" "$dest"
    printf 'built %-40s %-26s %6d KiB\n' "${dest#"$repo"/}" "$what" "$((($(stat -c %s "$dest") + 1023) / 1024))"
}

ensure_rust_targets
ensure_apt_packages

plugin_packages=()
plugin_bins=()
hostile_bins=()
target_dir=""
while read -r package bin dir; do
    if [[ $package == target-dir ]]; then
        target_dir="$bin"
    elif [[ $dir == "$repo"/plugins/* ]]; then
        [[ $bin == "$(basename "$dir")" ]] ||
            die "plugin $package: its bin must be named after its folder ($(basename "$dir")), not $bin"
        plugin_packages+=("$package")
        plugin_bins+=("$bin")
    elif [[ $package == "$HOSTILE_PACKAGE" ]]; then
        hostile_bins+=("$bin")
    fi
done < <(workspace_bins)
[[ -n $target_dir ]] || die "cargo metadata did not say where the target directory is"

# Which hostile bins are components: one name a line, `#` starts a comment.
wasip2_hostile=()
if [[ -f $WASIP2_LIST ]]; then
    while read -r line; do
        name="${line%%#*}"
        name="${name//[[:space:]]/}"
        [[ -n $name ]] || continue
        [[ " ${hostile_bins[*]} " == *" $name "* ]] ||
            die "$WASIP2_LIST names $name, which is not a bin of $HOSTILE_PACKAGE"
        wasip2_hostile+=("$name")
    done <"$WASIP2_LIST"
fi
wasip1_hostile=()
for bin in "${hostile_bins[@]}"; do
    [[ " ${wasip2_hostile[*]} " == *" $bin "* ]] || wasip1_hostile+=("$bin")
done

# One cargo invocation per target, so cargo schedules all of it together.
p1_args=()
for package in "${plugin_packages[@]}"; do p1_args+=(-p "$package"); done
if ((${#wasip1_hostile[@]})); then
    p1_args+=(-p "$HOSTILE_PACKAGE")
fi
for bin in "${plugin_bins[@]}" "${wasip1_hostile[@]}"; do p1_args+=(--bin "$bin"); done
# The engine's preview 2 test runs read_file as a component.
p2_args=(-p airlock-plugin-read-file --bin read_file)
if ((${#wasip2_hostile[@]})); then
    p2_args+=(-p "$HOSTILE_PACKAGE")
    for bin in "${wasip2_hostile[@]}"; do p2_args+=(--bin "$bin"); done
fi

cargo build --target wasm32-wasip1 --profile "$PROFILE" "${p1_args[@]}"
cargo build --target wasm32-wasip2 --profile "$PROFILE" "${p2_args[@]}"

p1_out="$target_dir/wasm32-wasip1/$PROFILE"
p2_out="$target_dir/wasm32-wasip2/$PROFILE"
for bin in "${plugin_bins[@]}"; do
    place "$p1_out/$bin.wasm" "$repo/plugins/$bin/$bin.wasm" "$CORE_MODULE_HEADER" "wasip1 module"
done
for bin in "${wasip1_hostile[@]}"; do
    place "$p1_out/$bin.wasm" "$repo/tests/modules/$bin.wasm" "$CORE_MODULE_HEADER" "wasip1 module"
done
for bin in "${wasip2_hostile[@]}"; do
    place "$p2_out/$bin.wasm" "$repo/tests/modules/$bin.wasm" "$COMPONENT_HEADER" "wasip2 component"
done
place "$p2_out/read_file.wasm" "$repo/tests/modules/read_file_p2.wasm" "$COMPONENT_HEADER" \
    "wasip2 component"

# The C plugin. Debian's wasi-libc lives in clang's default multiarch paths
# (/usr/include/wasm32-wasi, /usr/lib/wasm32-wasi); a wasi-sdk style sysroot is used
# instead when WASI_SYSROOT names one or /usr/share/wasi-sysroot exists.
sysroot="${WASI_SYSROOT:-/usr/share/wasi-sysroot}"
sysroot_args=()
[[ -d $sysroot ]] && sysroot_args=("--sysroot=$sysroot")
c_out="$(mktemp -d)"
trap 'rm -rf "$c_out"' EXIT
clang --target=wasm32-wasi "${sysroot_args[@]}" -O2 -std=c11 -Wall -Wextra -Wpedantic -Werror \
    -Isdk/c -Wl,--strip-all plugins/wc/wc.c -o "$c_out/wc.wasm"
place "$c_out/wc.wasm" "$repo/plugins/wc/wc.wasm" "$CORE_MODULE_HEADER" "wasip1 module (C)"
