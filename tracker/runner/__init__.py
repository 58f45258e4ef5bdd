"""Run many cells: a process of its own per measurement (forked from a server that imported torch once), GPU timing
serialized, results recorded in the store and in asv."""
