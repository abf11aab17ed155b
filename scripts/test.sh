#!/usr/bin/env bash
# Set up everything on a fresh machine and run the tests: every row of the pinned-version
# matrix in noxfile.py (torch_npu absent with the full suite; each pinned wheel; each
# genuine upstream state of the backend; each pre-fix copy). One row at a time:
# `.venv/bin/nox -s genuine-8bfbb9ed1` (`-l` lists the rows).
# Usage: bash scripts/test.sh [extra pytest args: then only the "none" row runs, with them]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
if [ "$#" -gt 0 ]; then
  exec "$VENV/bin/nox" -f noxfile.py -s none -- "$@"
fi
exec "$VENV/bin/nox" -f noxfile.py
