"""Where the project's own files are: the repository root (asv.conf.json, benchmarks/) from any working directory."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ASV_CONF = REPO_ROOT / "asv.conf.json"
