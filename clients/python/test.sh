#!/usr/bin/env bash
# Tests the Python client as a user gets it: builds the package from this checkout (its
# build generates the airlock.v1 stubs from ../../proto) and installs it, with
# requirements-test.txt, into a virtualenv of its own (.venv); checks it with mypy --strict;
# then runs its tests against real airlockd daemons they start themselves ($AIRLOCKD, else
# target/debug/airlockd of this checkout).
#
#   clients/python/test.sh                 install, then type-check and test
#   clients/python/test.sh --install-only  only install the test's packages
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"

if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
fi
echo "python client: installing the test's packages into $venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-test.txt"
if [[ ${1:-} == --install-only ]]; then
    echo "python client: packages installed" >&2
    exit 0
fi

echo "python client: building and installing airlock-client from $here" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$here"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here[langchain,openai-agents]"

echo "python client: mypy --strict" >&2
(cd "$here" && "$venv/bin/python" -m mypy --strict src/airlock_client examples)

echo "python client: tests against real daemons" >&2
# From the package's directory but against the installed package: src/ is not on the path.
cd "$here"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests
