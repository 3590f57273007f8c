#!/usr/bin/env bash
# Installs the Python toolchain of airlock tools: componentize-py (from PyPI), which
# bundles CPython 3.x built for WASI and turns a Python app into a WebAssembly component.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1
TOOLCHAINS="${AIRLOCK_TOOLCHAINS:-$HOME/.cache/airlock/toolchains}"
VENV="$TOOLCHAINS/venv-python"
STAMP="$VENV/.airlock-componentize-py-$COMPONENTIZE_PY_VERSION"

if [ -f "$STAMP" ] && [ -x "$VENV/bin/componentize-py" ]; then
    echo "componentize-py $COMPONENTIZE_PY_VERSION already installed in $VENV"
    exit 0
fi

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "python3 not found: installing it with apt-get"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update
    $SUDO apt-get install -y python3 python3-venv
    PYTHON=python3
fi
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "python3 has no venv/ensurepip: installing python3-venv with apt-get"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update
    $SUDO apt-get install -y python3-venv
fi

echo "creating the virtual environment $VENV"
mkdir -p "$TOOLCHAINS"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
echo "installing componentize-py $COMPONENTIZE_PY_VERSION from PyPI"
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "componentize-py==$COMPONENTIZE_PY_VERSION"
"$VENV/bin/componentize-py" --version
touch "$STAMP"
echo "componentize-py $COMPONENTIZE_PY_VERSION installed in $VENV"
