"""The workloads of the torch.compile mode study: pure PyTorch, no timing, no asv.

Import what you need from the submodules: `workloads.names` (torch-free), `workloads.registry`,
`workloads.presets`. This package imports nothing itself, so the names stay cheap to import."""
