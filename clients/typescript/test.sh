#!/usr/bin/env bash
# Tests the TypeScript client: installs its npm dependencies when node_modules is missing or
# older than package-lock.json (npm ci), generates the airlock.v1 code, compiles with tsc
# --strict, and runs node --test against real airlockd daemons the tests start themselves
# ($AIRLOCKD, default ../../target/debug/airlockd).
#
#   ./test.sh                  install if needed, then build and test
#   ./test.sh --install-only   only install the dependencies
set -euo pipefail
cd "$(dirname "$0")"

install_only=false
for arg in "$@"; do
  case "$arg" in
    --install-only) install_only=true ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done

step() { printf '\n==> %s\n' "$*"; }

command -v node >/dev/null || { echo "test.sh: node is not installed (Node.js 20 or later is needed)" >&2; exit 1; }
command -v npm >/dev/null || { echo "test.sh: npm is not installed" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "test.sh: Node.js $(node --version) is too old: 20 or later is needed" >&2
  exit 1
fi

# npm writes node_modules/.package-lock.json on every install: older than the lock file (or
# package.json) means the lock changed since.
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || [ package.json -nt "$stamp" ]; then
  step "npm ci (node $(node --version), npm $(npm --version))"
  npm ci --no-audit --no-fund
else
  step "dependencies up to date (node_modules matches package-lock.json)"
fi
$install_only && exit 0

airlockd="${AIRLOCKD:-$(cd ../.. && pwd)/target/debug/airlockd}"
if [ ! -x "$airlockd" ]; then
  echo "test.sh: no airlockd at $airlockd: build it (cargo build -p airlock-daemon) or set AIRLOCKD" >&2
  exit 1
fi
export AIRLOCKD="$airlockd"
command -v openssl >/dev/null || { echo "test.sh: the TLS tests need the openssl CLI" >&2; exit 1; }

step "npm test: generate (buf + protoc-gen-es), tsc --strict, node --test against $AIRLOCKD"
start=$(date +%s)
npm test
printf '\n==> done in %ss\n' "$(( $(date +%s) - start ))"
