#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv with a CPU build of torch.
#   TORCH_VERSION    torch to install (default 2.13.0)
#   TORCH_INDEX_URL  where pip finds a CPU build, e.g. https://download.pytorch.org/whl/cpu; unset: pip's
#                    default configuration (on this project's CI machines that is a local CPU wheel).
#   EXTRAS           pip extras of the project, e.g. test
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
# torch first and pinned: a bare `torch` requirement would pull a multi-GB CUDA build from PyPI.
"${pip[@]}" install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==${TORCH_VERSION:-2.13.0}"
"${pip[@]}" install -e ".${EXTRAS:+[$EXTRAS]}"
