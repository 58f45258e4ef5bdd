"""git's access to a GitHub repository with the job's token.

GITHUB_TOKEN is handed to git as an HTTP authorization header for the URLs of one server only (GITHUB_SERVER_URL,
default https://github.com), through git's environment (GIT_CONFIG_COUNT): never on a command line, where other
processes could read it, and never written to .git/config (what actions/checkout's persist-credentials would do).
Inside GitHub Actions the header's encoded form is masked in the log, as the token itself is.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable, Mapping

DEFAULT_SERVER = "https://github.com"


def git_env(env: Mapping[str, str], say: Callable[[str], object] | None = None) -> dict[str, str]:
    """The variables to add to git's environment so that it authenticates with `env`'s GITHUB_TOKEN (none without
    one). Configuration already passed the same way (GIT_CONFIG_COUNT) is kept."""
    token = env.get("GITHUB_TOKEN", "")
    if not token:
        return {}
    server = (env.get("GITHUB_SERVER_URL") or DEFAULT_SERVER).rstrip("/")
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    if env.get("GITHUB_ACTIONS") == "true":  # on stderr: a command's standard output may be its answer
        (say or (lambda line: print(line, file=sys.stderr)))(f"::add-mask::{basic}")
    count = env.get("GIT_CONFIG_COUNT", "0")
    n = int(count) if count.isdigit() else 0
    return {"GIT_CONFIG_COUNT": str(n + 1), f"GIT_CONFIG_KEY_{n}": f"http.{server}/.extraheader",
            f"GIT_CONFIG_VALUE_{n}": f"AUTHORIZATION: basic {basic}"}


__all__ = ["git_env"]
