#!/usr/bin/env bash
# Builds the console into console/dist (see build.mjs). Installs the pinned npm packages
# first when node_modules is missing or older than package-lock.json.
#
#   console/build.sh                 install when needed, then build
#   console/build.sh --install-only  install when needed (the browser tests need axe-core)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! command -v node >/dev/null 2>&1; then
  echo "build.sh: node (>= 18) is required" >&2
  exit 1
fi

if [[ ! -d node_modules || package-lock.json -nt node_modules ]]; then
  echo "build.sh: installing npm packages (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error
  touch node_modules
else
  echo "build.sh: npm packages are up to date" >&2
fi
[[ ${1:-} == --install-only ]] && exit 0

echo "build.sh: bundling into dist/" >&2
node build.mjs
