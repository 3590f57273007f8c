#!/usr/bin/env bash
# Installs the MCP peers airlock's tests run, from the registries, into this directory:
# the official Python SDK (`mcp`, PyPI) in .venv — made with Debian's python3 so that a
# sandbox granting /usr can run it — and the npm packages of package.json in node_modules
# (`@modelcontextprotocol/server-everything`, the reference server, and the conformance suite
# in two versions, the newer as the alias `conformance-next`); and downloads what
# `airlock mcp add`'s test installs (mcp-add.txt) into .cache. What is already installed at
# the pinned versions is skipped, so a second run takes a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

if [[ ! -x .venv/bin/python ]]; then
    echo "mcp peers: creating a Python virtualenv" >&2
    /usr/bin/python3 -m venv .venv
fi
if ! cmp -s requirements.txt .venv/installed-requirements.txt; then
    echo "mcp peers: installing the Python MCP SDK from PyPI" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
    cp requirements.txt .venv/installed-requirements.txt
fi
if ! cmp -s package.json node_modules/.installed-package.json 2>/dev/null; then
    echo "mcp peers: installing MCP servers from npm" >&2
    npm install --no-audit --no-fund --loglevel=error >/dev/null
    cp package.json node_modules/.installed-package.json
fi
# What `airlock mcp add` installs in its test (mcp-add.txt), into pip's and npm's caches in
# .cache, which the test installs through: downloaded once, then read from there.
if ! cmp -s mcp-add.txt .cache/downloaded-mcp-add.txt 2>/dev/null; then
    echo "mcp peers: downloading the servers of mcp-add.txt into .cache" >&2
    mkdir -p .cache
    while read -r spec; do
        case "$spec" in
            pypi:*)
                package="${spec#pypi:}"
                warm="$(mktemp -d)"
                .venv/bin/python -m pip download --quiet --disable-pip-version-check \
                    --only-binary=:all: --cache-dir "$here/.cache/pip" --dest "$warm" \
                    "${package%@*}==${package##*@}"
                rm -rf "$warm"
                ;;
            npm:*)
                warm="$(mktemp -d)"
                echo '{"private": true}' >"$warm/package.json"
                npm install --prefix "$warm" --cache "$here/.cache/npm" --no-audit --no-fund \
                    --ignore-scripts --loglevel=error "${spec#npm:}" >/dev/null
                rm -rf "$warm"
                ;;
        esac
    done < <(grep -v '^#' mcp-add.txt)
    cp mcp-add.txt .cache/downloaded-mcp-add.txt
fi
echo "mcp peers: installed" >&2
