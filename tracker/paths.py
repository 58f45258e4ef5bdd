"""Where the project's own files are: the repository root (asv.conf.json, benchmarks/) from any working directory;
and the repository the results are filed under and written into: this checkout, or a kernel repository."""

import os
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ASV_CONF = REPO_ROOT / "asv.conf.json"
# A kernel repository that plugs its workloads in (docs/plugins.md) files its results under its own commits: it
# names its checkout here, or runs the commands from inside it. Neither: this project's checkout, whose commits
# the study's workloads are measured at.
ENV_PROJECT_REPO = "COMPILE_BASELINES_REPO"
# What a kernel repository's pyproject.toml declares (workloads.plugins, workloads.kernels.registry)
PLUGIN_GROUP_PREFIX = "compile_baselines."
# Where runs write inside a kernel repository: asv's own default place (asv.conf.json's results_dir, html_dir)
RESULTS_SUBDIR, HTML_SUBDIR = Path(".asv") / "results", Path(".asv") / "html"


def kernel_repo(cwd: Path | None = None) -> Path | None:
    """The kernel repository the working directory is in: the nearest directory at or above it with a pyproject.toml,
    when that file declares a compile_baselines entry point (what `init` writes); else None."""
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if not pyproject.is_file():
            continue
        try:
            groups = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("entry-points", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
            return None
        return folder if any(str(g).startswith(PLUGIN_GROUP_PREFIX) for g in groups) else None
    return None


def workspace(environ: os._Environ[str] | dict[str, str] = os.environ, cwd: Path | None = None) -> Path | None:
    """The kernel repository the commands work for: COMPILE_BASELINES_REPO, else the one the working directory is in;
    None when neither is set or it is this checkout."""
    given = environ.get(ENV_PROJECT_REPO)
    found = Path(given).resolve() if given else kernel_repo(cwd)
    return None if found is None or found == REPO_ROOT else found


def workspace_subdir(config: str | os.PathLike[str], subdir: Path) -> str | None:
    """`subdir` of the kernel repository the commands work for (`workspace`), where the project's own asv config
    (`config`) would put it into compile-baselines' checkout; None otherwise."""
    here = workspace()
    return str(here / subdir) if here is not None and Path(config).resolve() == ASV_CONF else None


def project_repo(environ: os._Environ[str] | dict[str, str] = os.environ, cwd: Path | None = None) -> Path:
    """The git repository whose commits `run` records under and `compare`, `rm` and `pr` resolve refs in."""
    return workspace(environ, cwd) or REPO_ROOT
