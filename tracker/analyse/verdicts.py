"""The words of a comparison's verdicts and the --fail-on choices: constants only, so the CLI can name them
without loading the analysis (pandas)."""

FAIL_ON = ("best-change", "regression", "never")
EXIT_OK, EXIT_FAIL_ON = 0, 3  # 1 and 2 are the CLI's: a tool error, a usage error

# Cell verdicts. Counted as regressions: SLOWER, NOW_FAILS; as improvements: FASTER, NOW_OK.
SLOWER, FASTER, SAME, NOISY, UNKNOWN = "slower", "faster", "same", "noisy", "unknown"
NOW_FAILS, NOW_OK, FAILS, ADDED, REMOVED = "now fails", "now ok", "fails", "added", "removed"
# Kernel verdicts: the speedup over the best baseline went up or down.
GAINED, LOST = "gained", "lost"
REGRESSION_VERDICTS = (SLOWER, NOW_FAILS)
IMPROVEMENT_VERDICTS = (FASTER, NOW_OK)
