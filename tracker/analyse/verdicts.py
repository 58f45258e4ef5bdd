"""The words of a comparison's verdicts and the --fail-on choices: constants only, so the CLI can name them
without loading the analysis (pandas)."""

from enum import StrEnum

FAIL_ON = ("best-change", "regression", "never")
# The change tests (tracker.analyse.changetest): each cell against its own noise, the fixed bands of earlier versions,
# or base and head measured in pairs, round after round, until each cell is decided (the PR flow).
TESTS = ("noise", "bands", "paired")
EXIT_OK, EXIT_FAIL_ON = 0, 3  # 1 and 2 are the CLI's: a tool error, a usage error



class Word(StrEnum):
    """Every verdict a cell or a kernel can get; each is its own word in the JSON and the tables."""

    SLOWER = "slower"
    FASTER = "faster"
    # Within the rule's equivalence margin (the paired test: the change's interval lies inside it; the noise and band
    # tests: no change beyond the cell's noise)
    SAME = "same"
    NOISY = "noisy"  # the samples of a measurement spread so far that it was disturbed while it ran
    UNKNOWN = "unknown"  # one side has no samples (an imported study): not judged
    # Neither changed nor the same: the interval straddles the margin after every compile the budget allowed
    UNDECIDED = "undecided"
    NOW_FAILS = "now fails"
    NOW_OK = "now ok"
    FAILS = "fails"
    ADDED = "added"
    REMOVED = "removed"
    # Kernel verdicts: the speedup over the best baseline went up or down.
    GAINED = "gained"
    LOST = "lost"
    # A cell that moved although no source it depends on changed and the versions are the same (analyse.attribution):
    # not the change's doing, so never counted as a regression or an improvement.
    SOURCE_UNCHANGED = "source unchanged"
    # A compiled cell that moved although its generated code is the same at both commits under the same versions (GPU,
    # torch, triton, CUDA, driver; its fingerprints): the same kernels, at most other launch configs autotuning drew,
    # so not the commits' doing either (the machine's state or autotuning's draw): never counted.
    CODE_UNCHANGED = "code unchanged"
    # A cell that moved beyond its band but was not measured in enough fresh compiles to confirm it
    # (ChangeRule.confirm): listed, never counted, until a re-measurement confirms or clears it.
    UNCONFIRMED = "unconfirmed"


# Cell verdicts. Counted as regressions: SLOWER, NOW_FAILS; as improvements: FASTER, NOW_OK.
SLOWER, FASTER, SAME, NOISY, UNKNOWN, UNDECIDED = (Word.SLOWER, Word.FASTER, Word.SAME, Word.NOISY, Word.UNKNOWN,
                                                   Word.UNDECIDED)
NOW_FAILS, NOW_OK, FAILS, ADDED, REMOVED = Word.NOW_FAILS, Word.NOW_OK, Word.FAILS, Word.ADDED, Word.REMOVED
GAINED, LOST = Word.GAINED, Word.LOST
SOURCE_UNCHANGED, CODE_UNCHANGED, UNCONFIRMED = Word.SOURCE_UNCHANGED, Word.CODE_UNCHANGED, Word.UNCONFIRMED
# Why a cell is too noisy to judge (NOISY): its samples spread beyond the rule's limit (disturbed while measured), or
# (the fixed bands) it moved beyond half its band on samples that differ, yet within the band.
DISTURBED, HALF_BAND = "disturbed", "half band"
REGRESSION_VERDICTS = (SLOWER, NOW_FAILS)
IMPROVEMENT_VERDICTS = (FASTER, NOW_OK)

# What a cell of a shared baseline was judged on (its noise, in CellChange.noise): measured once for both sides, it is
# the same by construction (a kernel-only change: tracker.store.pairing.SharedBaseline)
SHARED_BASELINE = "shared baseline"

# What the compiled code of a cell did between two runs, from its fingerprints (tracker.measure.fingerprint):
# the same generated code and launch configs; the same code launched with other configs (autotuning chose
# differently); other generated code (the source, torch, or max-autotune's template choice changed).
COMPILED_SAME, COMPILED_CONFIGS, COMPILED_CODE = "same compiled code", "other launch configs", "other generated code"

# Which change moved a best baseline or a cell when both the commit and torch changed between two runs
# (tracker.analyse.versionattribution): the commit alone, torch alone, each on its own, neither on its own (each leg
# stayed within its band, together they left it), or undecided (no cross run, a leg too noisy, cross runs disagree).
BY_COMMIT, BY_TORCH, BY_BOTH, BY_NEITHER, BY_UNDECIDED = "commit", "torch", "both", "neither alone", "undecided"
CAUSES = (BY_COMMIT, BY_TORCH, BY_BOTH, BY_NEITHER, BY_UNDECIDED)
