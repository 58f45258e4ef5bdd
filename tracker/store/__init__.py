"""Store results: the cell store (one JSON a cell), asv's result and machine files, reading them back as a table,
and the results kept on a git branch."""
