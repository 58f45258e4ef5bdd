"""Kernels under test: users' own implementations of the workloads, judged against the best compile mode.

Declare one with `@candidate(workload=..., name=..., devices=...)` on a function with the workload's
signature; `docs/kernels.md` says how, in-tree and from another package through an entry point.
"""

from workloads.kernels.registry import Candidate, candidate, candidates, get

__all__ = ["Candidate", "candidate", "candidates", "get"]
