# shellcheck shell=bash
# Shared by sdk/<lang>/install.sh (and the C and C++ test.sh): what installing a pinned
# toolchain takes, once per machine, under $TOOLCHAINS. Source it; it defines TOOLCHAINS and
# functions and changes nothing by itself. Not for the templates' build.sh: they are copied
# into projects of their own and must stand alone.
#
# A toolchain is installed when its stamp file is there (holding the pinned versions, for the
# stamps that hold text); an install removes the stamp first and writes it last, after checking
# what it installed, so an interrupted install is redone on the next run.

# Where the toolchains go (the templates' build.sh look there first).
# shellcheck disable=SC2034 # for the scripts that source this file
readonly TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"

# The C toolchain for wasm32-wasi (C's, and under C++'s libc++): Debian 12's versions,
# which apt-get is asked for exactly.
readonly LLVM_VERSION=1:14.0.6-12
readonly WASI_LIBC_VERSION=0.0~git20220510.9886d3d-2
# shellcheck disable=SC2034 # for the scripts that source this file
readonly WASI_C_PACKAGES=(
    "clang-14=$LLVM_VERSION"
    "lld-14=$LLVM_VERSION"
    "libclang-rt-14-dev-wasm32=$LLVM_VERSION"
    "wasi-libc=$WASI_LIBC_VERSION"
)

# Prints a progress line.
say() { echo "${0##*/}: $*"; }

# Prints a warning to stderr.
warn() { echo "${0##*/}: warning: $*" >&2; }

# Prints an error to stderr and exits 1.
die() {
    echo "${0##*/}: error: $*" >&2
    exit 1
}

# already_installed WHAT WHERE: says WHAT is already installed in WHERE and exits 0.
already_installed() {
    say "$1 already installed in $2"
    exit 0
}

# stamp_matches STAMP [TEXT]: true when the file STAMP exists (and holds TEXT, when given).
stamp_matches() {
    [[ -f $1 ]] && { (($# < 2)) || [[ "$(cat "$1")" == "$2" ]]; }
}

# write_stamp STAMP [TEXT]: marks an install done (writing TEXT into STAMP, when given).
write_stamp() {
    if (($# < 2)); then : >"$1"; else printf '%s\n' "$2" >"$1"; fi
}

# first_executable PATH...: prints the first PATH that is an executable file (for globs).
first_executable() {
    local candidate
    for candidate in "$@"; do
        [[ -x $candidate ]] && { echo "$candidate"; return 0; }
    done
    return 1
}

# missing_debian_packages SPEC...: prints the SPECs (NAME or NAME=VERSION) whose package is not
# installed at all; one installed at another version (a Debian point release) is kept.
missing_debian_packages() {
    local spec
    for spec in "$@"; do
        dpkg-query -W -f='${Status}' "${spec%%=*}" 2>/dev/null | grep -q 'install ok installed' ||
            echo "$spec"
    done
}

# ensure_debian_packages SPEC...: installs the missing ones with apt-get, as root or through sudo.
ensure_debian_packages() {
    command -v dpkg-query >/dev/null ||
        die "this installs Debian packages with apt-get; on another system install $* yourself"
    local missing sudo=()
    mapfile -t missing < <(missing_debian_packages "$@")
    ((${#missing[@]})) || return 0
    if ((EUID != 0)); then
        command -v sudo >/dev/null ||
            die "missing Debian packages: ${missing[*]}; install them as root: apt-get install ${missing[*]}"
        sudo=(sudo)
    fi
    say "apt-get update"
    "${sudo[@]}" apt-get update -qq || die "apt-get update failed"
    say "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" || die "apt-get could not install ${missing[*]}"
}

# check_build FILE TEXT COMPILER ARG...: builds the program TEXT (saved as FILE in a scratch
# folder) with COMPILER ARG... FILE -o FILE.wasm, and dies when it does not build.
check_build() {
    local file=$1 text=$2 scratch
    shift 2
    say "checking the toolchain with a test build"
    scratch="$(mktemp -d)"
    printf '%s\n' "$text" >"$scratch/$file"
    if ! "$@" "$scratch/$file" -o "$scratch/$file.wasm"; then
        rm -rf "$scratch"
        die "${1##*/} could not build a wasm32-wasi program"
    fi
    rm -rf "$scratch"
}

# ensure_python_venv: sets PYTHON (default python3) to a Python that can make venvs, installing
# python3 and python3-venv from Debian when needed.
ensure_python_venv() {
    PYTHON="${PYTHON:-python3}"
    if ! command -v "$PYTHON" >/dev/null; then
        say "$PYTHON not found: installing python3 from Debian"
        ensure_debian_packages python3 python3-venv
        PYTHON=python3
    fi
    if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        say "$PYTHON has no venv/ensurepip: installing python3-venv from Debian"
        ensure_debian_packages python3-venv
        "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1 || die "$PYTHON still cannot make a venv"
    fi
}

# pip_stamp VENV PACKAGE VERSION: prints the stamp pip_toolchain writes.
pip_stamp() { echo "$1/.airlock-$2-$3"; }

# pip_toolchain VENV PACKAGE VERSION CHECK [SIZE]: makes VENV afresh, installs PACKAGE==VERSION
# from PyPI (a SIZE download, when given), runs the command CHECK, then writes the stamp.
pip_toolchain() {
    local venv=$1 package=$2 version=$3 check=$4 size=${5:+ (${5})}
    ensure_python_venv
    say "creating the virtual environment $venv"
    mkdir -p "$(dirname "$venv")"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    say "installing $package $version from PyPI$size"
    "$venv/bin/python" -m pip install --disable-pip-version-check --quiet "$package==$version"
    "$check"
    write_stamp "$(pip_stamp "$venv" "$package" "$version")"
}

# ensure_node: installs nodejs and npm from Debian when either is missing, and says which run.
ensure_node() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        say "node/npm not found: installing nodejs and npm from Debian"
        ensure_debian_packages nodejs npm
        if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
            die "node or npm is still missing after installing nodejs and npm"
        fi
    fi
    say "node $(node --version), npm $(npm --version)"
}

# node_major: prints the major version of node.
node_major() { node -p 'process.versions.node.split(".")[0]'; }

# npm_toolchain DIR STAMP CHECK PKG@VER...: installs the pinned packages into the prefix DIR
# (after ensure_node), runs the command CHECK, then writes them into STAMP.
npm_toolchain() {
    local dir=$1 stamp=$2 check=$3
    shift 3
    say "npm install $* into $dir"
    mkdir -p "$dir"
    rm -f "$dir"/.airlock-*
    npm install --prefix "$dir" --save-exact --no-audit --no-fund --loglevel=error "$@"
    "$check"
    write_stamp "$stamp" "$*"
}

# native_vectors TOOL WORK: runs TOOL, a native build of a wordstats template, on every vector
# of sdk/wordstats/vectors.json that reaches a tool, in a copy of its workspace under WORK.
native_vectors() {
    local wordstats
    wordstats="$(cd "$(dirname "${BASH_SOURCE[0]}")/wordstats" && pwd)"
    cp -r "$wordstats/workspace" "$2/workspace"
    python3 - "$1" "$2/workspace" "$wordstats/vectors.json" <<'EOF'
import json, subprocess, sys
tool, workspace, vectors = sys.argv[1:]
failed = 0
for vector in json.load(open(vectors))["vectors"]:
    if "status" in vector:
        continue  # refused by the daemon's schema check, never reaches the tool
    run = subprocess.run([tool], input=json.dumps(vector["arguments"]).encode(),
                         cwd=workspace, capture_output=True)
    try:
        doc = json.loads(run.stdout)
    except ValueError:
        doc = None
    want = {"ok": vector["ok"]} if "ok" in vector else {
        "error": {"message": vector["error"], "retryable": False}}
    if run.returncode != 0 or doc != want:
        failed += 1
        print(f"FAIL {vector['name']}: exit {run.returncode}, {run.stdout!r} {run.stderr!r}")
    else:
        print(f"ok   {vector['name']}")
sys.exit(1 if failed else 0)
EOF
}
