"""Adoption: `compile-baselines init` writes what a kernel repository needs to plug its workloads in."""
