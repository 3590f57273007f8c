#!/usr/bin/env bash
# Installs the Python toolchain of airlock tools: componentize-py (from PyPI), which
# bundles CPython 3.x built for WASI and turns a Python app into a WebAssembly component.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail
# shellcheck source=sdk/toolchains.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchains.sh"

readonly COMPONENTIZE_PY_VERSION=0.25.1
readonly VENV="$TOOLCHAINS/venv-python"
readonly COMPONENTIZE_PY="$VENV/bin/componentize-py"

# Runs the installed componentize-py.
check_componentize_py() { "$COMPONENTIZE_PY" --version; }

if stamp_matches "$(pip_stamp "$VENV" componentize-py "$COMPONENTIZE_PY_VERSION")" && [[ -x $COMPONENTIZE_PY ]]; then
    already_installed "componentize-py $COMPONENTIZE_PY_VERSION" "$VENV"
fi
pip_toolchain "$VENV" componentize-py "$COMPONENTIZE_PY_VERSION" check_componentize_py
say "componentize-py $COMPONENTIZE_PY_VERSION installed in $VENV"
