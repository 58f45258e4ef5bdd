"""Measure one cell: compile, warm up, time with do_bench (a CPU timer without CUDA), check against eager."""
