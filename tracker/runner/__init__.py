"""Run many cells: one fresh process per cell, GPU timing serialized, results recorded in the store and in asv."""
