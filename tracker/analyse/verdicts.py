"""The words of a comparison's verdicts and the --fail-on choices: constants only, so the CLI can name them
without loading the analysis (pandas)."""

FAIL_ON = ("best-change", "regression", "never")
# The change tests (tracker.analyse.judge): each cell against its own noise, or the fixed bands of earlier versions.
TESTS = ("noise", "bands")
EXIT_OK, EXIT_FAIL_ON = 0, 3  # 1 and 2 are the CLI's: a tool error, a usage error

# Cell verdicts. Counted as regressions: SLOWER, NOW_FAILS; as improvements: FASTER, NOW_OK.
SLOWER, FASTER, SAME, NOISY, UNKNOWN = "slower", "faster", "same", "noisy", "unknown"
NOW_FAILS, NOW_OK, FAILS, ADDED, REMOVED = "now fails", "now ok", "fails", "added", "removed"
# Kernel verdicts: the speedup over the best baseline went up or down.
GAINED, LOST = "gained", "lost"
# A cell that moved although no source it depends on changed and the versions are the same (analyse.attribution):
# not the change's doing, so never counted as a regression or an improvement.
SOURCE_UNCHANGED = "source unchanged"
# A cell that moved beyond its band but was not measured in enough fresh compiles to confirm it (ChangeRule.confirm):
# listed, never counted, until a re-measurement confirms or clears it.
UNCONFIRMED = "unconfirmed"
REGRESSION_VERDICTS = (SLOWER, NOW_FAILS)
IMPROVEMENT_VERDICTS = (FASTER, NOW_OK)

# What the compiled code of a cell did between two runs, from its fingerprints (tracker.measure.fingerprint):
# the same generated code and launch configs; the same code launched with other configs (autotuning chose
# differently); other generated code (the source, torch, or max-autotune's template choice changed).
COMPILED_SAME, COMPILED_CONFIGS, COMPILED_CODE = "same compiled code", "other launch configs", "other generated code"

# Which change moved a best baseline or a cell when both the commit and torch changed between two runs
# (tracker.analyse.versionattribution): the commit alone, torch alone, each on its own, neither on its own (each leg
# stayed within its band, together they left it), or undecided (no cross run, a leg too noisy, cross runs disagree).
BY_COMMIT, BY_TORCH, BY_BOTH, BY_NEITHER, UNDECIDED = "commit", "torch", "both", "neither alone", "undecided"
CAUSES = (BY_COMMIT, BY_TORCH, BY_BOTH, BY_NEITHER, UNDECIDED)
