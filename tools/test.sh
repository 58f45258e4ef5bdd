#!/usr/bin/env bash
# The test job: install with the test extra, lint (ruff, the workflows), run pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
EXTRAS=test bash tools/setup.sh
.venv/bin/ruff check .
PYTHON=.venv/bin/python bash .ci/lint-workflows
.venv/bin/python -m pytest -q "$@"
