"""Where the project's own files are: the repository root (asv.conf.json, benchmarks/) from any working directory,
and the git repository whose commits the results are filed under."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ASV_CONF = REPO_ROOT / "asv.conf.json"
# A kernel repository that plugs its workloads in (docs/plugins.md) files its results under its own commits: it
# names its checkout here. Unset: this project's checkout, whose commits the study's workloads are measured at.
ENV_PROJECT_REPO = "COMPILE_BASELINES_REPO"


def project_repo(environ: os._Environ[str] | dict[str, str] = os.environ) -> Path:
    """The git repository whose commits `run` records under and `compare`, `rm` and `pr` resolve refs in."""
    given = environ.get(ENV_PROJECT_REPO)
    return Path(given).resolve() if given else REPO_ROOT
