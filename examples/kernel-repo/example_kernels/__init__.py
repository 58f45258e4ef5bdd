"""An example kernel repository for compile-baselines: its workloads and its candidate kernels."""
