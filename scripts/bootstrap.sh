# Sourced by the other scripts: make .venv and install the project (and extras) into it.
# Usage: source scripts/bootstrap.sh [EXTRA]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
extra=${1:-}
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "priority-webhook needs Python 3.11 or newer as python3" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    if ! python3 -m venv .venv 2>/dev/null; then
        # Debian splits venv out of the interpreter package.
        rm -rf .venv
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv .venv
    fi
fi
spec="."
[ -n "$extra" ] && spec=".[$extra]"
stamp=".venv/.installed-$(cat setup.cfg pyproject.toml constraints.txt | sha256sum | cut -c1-16)-${extra:-base}"
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    # constraints.txt pins every dependency: the tests run on the versions the image ships.
    .venv/bin/python -m pip install -q -c constraints.txt -e "$spec"
    touch "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
