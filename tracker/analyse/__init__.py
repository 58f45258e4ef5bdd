"""Analyse a results table: the best mode per instance, wins, geomeans and margins, base-vs-head verdicts."""
