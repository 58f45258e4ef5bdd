"""compile-baselines: measure torch.compile modes, store them as asv results, and track the best baseline."""
