"""Which workloads of a module a change reaches: those whose definitions it touched (tracker.analyse.sourcediff),
and what a PR therefore measures."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tracker.analyse.attribution import definitions_reached, select_workloads, source_changes
from tracker.analyse.sourcediff import reached
from workloads.names import WORKLOAD_NAMES

ROOT = Path(__file__).resolve().parents[1]
LLM_PY = (ROOT / "workloads" / "llm.py").read_text()
LLM = [w for w in WORKLOAD_NAMES if w.startswith("llm_")]
GEMMS = {"llm_swiglu_mlp", "llm_gelu_mlp", "llm_logits_projection_softmax", "llm_moe_router"}


def edited(old: str, new: str, source: str = LLM_PY) -> str:
    assert old in source, old
    return source.replace(old, new)


def test_a_change_to_one_workload_s_function_reaches_that_workload_only() -> None:
    rope = edited("out[..., 0::2] = xe * c - xo * s", "out[..., 0::2] = xe * c - s * xo")
    assert reached(LLM_PY, rope, LLM) == {"llm_rope_apply"}
    # its builder, or its declaration (the FLOP count beside it), reach it alone too
    builder = edited("return kl_divergence_loss, (_randn(p.tokens, p.vocab, device=d)",
                     "return kl_divergence_loss, (_randn(p.tokens, p.vocab - 1, device=d)")
    assert reached(LLM_PY, builder, LLM) == {"llm_kl_divergence_loss"}
    kl = edited("lambda p: 12.0 * p.tokens * p.vocab", "lambda p: 13.0 * p.tokens * p.vocab")
    assert reached(LLM_PY, kl, LLM) == {"llm_kl_divergence_loss"}


def test_a_definition_several_workloads_use_reaches_each_of_them() -> None:
    assert reached(LLM_PY, edited("return 2.0 * m * k * n", "return 2 * m * k * n"), LLM) == GEMMS
    norm = edited("def _norm_input(p: Preset, d: torch.device) -> torch.Tensor:\n",
                  "def _norm_input(p: Preset, d: torch.device) -> torch.Tensor:\n    p = p\n")
    assert reached(LLM_PY, norm, LLM) == {"llm_rmsnorm", "llm_layernorm"}
    # an import is a definition of the names it binds
    unused = edited("import torch.nn.functional as F\n", "import torch.nn.functional as F\nimport math\n")
    assert reached(LLM_PY, unused, LLM) == set()
    f_users = {"llm_layernorm", "llm_swiglu_mlp", "llm_gelu_mlp", "llm_label_smoothed_ce_loss",
               "llm_kl_divergence_loss"}
    assert reached(LLM_PY, edited("import torch.nn.functional as F", "import torch.nn.functional as G"), LLM) == f_users


def test_comments_docstrings_and_the_order_of_definitions_reach_no_workload() -> None:
    assert reached(LLM_PY, LLM_PY + "\n# a comment\n", LLM) == set()
    documented = edited("def _mm(m: int, k: int, n: int) -> float:\n",
                        'def _mm(m: int, k: int, n: int) -> float:\n    """Two FLOPs a multiply-add."""\n')
    assert reached(LLM_PY, documented, LLM) == set()
    qk = LLM_PY[LLM_PY.index("def qk_norm"):LLM_PY.index("def label_smoothed_ce_loss")]
    moved = LLM_PY.replace(qk, "").replace("def rmsnorm", qk + "def rmsnorm")
    assert moved != LLM_PY and reached(LLM_PY, moved, LLM) == set()


@pytest.mark.parametrize("change", [
    "module-level code", "a name defined twice", "a workload added", "does not parse", "not declared literally",
    "declared in a function"])
def test_what_it_cannot_follow_reaches_every_workload_of_the_module(change: str) -> None:
    new = {"module-level code": LLM_PY + "\npass\n",
           "a name defined twice": LLM_PY + "\ndef rmsnorm(x, w):\n    return x\n",
           "a workload added": edited("WORKLOADS = (\n", 'WORKLOADS = (\n    Workload("llm_new", "llm", (), _build_kl, '
                                                        "lambda p: 1.0),\n"),
           "does not parse": LLM_PY + "\ndef (\n",
           "not declared literally": LLM_PY.replace('Workload("llm_qk_norm"', 'Workload(QK'),
           "declared in a function": edited("WORKLOADS = (\n", "def _declared():\n    return (\n").replace(
               "\n)\n", "\n    )\n\n\nWORKLOADS = _declared()\n"),
           }[change]
    assert reached(LLM_PY, new, LLM) is None


def test_a_selection_says_what_each_module_s_change_reached() -> None:
    rope = {"workloads/llm.py": frozenset({"llm_rope_apply"})}
    s = select_workloads(["workloads/llm.py", "README.md"], reached=rope)
    assert s.workloads == ("llm_rope_apply",) and not s.kernel_only
    assert s.describe() == "measured llm_rope_apply (workloads/llm.py changed: the code of llm_rope_apply)"
    none = select_workloads(["workloads/llm.py", "workloads/kernels/triton_rmsnorm.py"],
                            reached={"workloads/llm.py": frozenset()})
    # the module's workloads run the same code on both sides: only the kernel changed
    assert none.workloads == ("llm_rmsnorm",) and none.kernel_only
    assert "workloads/llm.py changed, but no workload's code in it" in none.describe()
    # a module it could not tell of: every workload it defines
    assert select_workloads(["workloads/llm.py"], reached={}).workloads == tuple(LLM)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_two_commits_are_read_from_git_and_a_file_one_of_them_lacks_reaches_all(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "llm.py").write_text(LLM_PY)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    base = _git(tmp_path, "rev-parse", "HEAD")
    topk = edited("vals, idx = torch.topk(p, 32", "vals, idx = torch.topk(p, 16")
    (tmp_path / "workloads" / "llm.py").write_text(topk)
    (tmp_path / "workloads" / "rl.py").write_text((ROOT / "workloads" / "rl.py").read_text())
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "head")
    files = ["workloads/llm.py", "workloads/rl.py"]
    found = definitions_reached(files, base, "HEAD", tmp_path)
    assert found == {"workloads/llm.py": {"llm_topk_sampling_prep"}}  # rl.py is new: all of its workloads
    assert select_workloads(files, reached=found).workloads == (
        "llm_topk_sampling_prep", "rl_ppo_clipped_loss", "rl_dpo_loss", "rl_grpo_loss")
    # compare, with the repository at hand, reads the same reach: the other llm workloads' moves are "source unchanged"
    reach = source_changes(base, "HEAD", tmp_path)
    assert reach is not None and reach.workloads == select_workloads(files, reached=found).workloads


class _Measured(Exception):
    pass


def _runner(commands: object) -> list[int]:
    raise _Measured  # what was chosen is in the log before anything is measured


def test_a_pr_measures_the_workloads_its_change_reached_or_with_whole_modules_all_of_the_module(
        tmp_path: Path) -> None:
    import io

    from tracker.flows.forge import PrintForge
    from tracker.flows.pr import PrRequest, pr

    _git(tmp_path, "init", "-q")
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "llm.py").write_text(LLM_PY)
    commit = ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam"]
    _git(tmp_path, "add", "-A")
    _git(tmp_path, *commit, "base")
    (tmp_path / "workloads" / "llm.py").write_text(LLM_PY + "# a comment\n")
    _git(tmp_path, *commit, "a comment")
    (tmp_path / "workloads" / "llm.py").write_text(edited("return torch.softmax(x @ w, dim=-1)",
                                                          "return torch.softmax(x @ w, -1)") + "# a comment\n")
    _git(tmp_path, *commit, "the logits projection")

    def asked(base: str, head: str, measures: bool = True, whole_modules: bool = False) -> tuple[str, str]:
        log, out = io.StringIO(), io.StringIO()
        request = PrRequest(base, head, tmp_path / "results", jobs=1, repo_dir=tmp_path, whole_modules=whole_modules)
        if measures:
            with pytest.raises(_Measured):
                pr(request, PrintForge(out), _runner, devices=[], log=log)
        else:
            assert pr(request, PrintForge(out), _runner, devices=[], log=log) is None
        return log.getvalue().splitlines()[0], out.getvalue()

    first, comment = asked("HEAD~2", "HEAD~1", measures=False)
    assert first.endswith("workloads/llm.py changed, but no workload's code in it (comments, docstrings or "
                          "definitions none uses))")
    assert "so nothing was measured" in comment and "no workload, kernel" not in comment
    first, _ = asked("HEAD~2", "HEAD")
    assert first.endswith("measured llm_logits_projection_softmax (workloads/llm.py changed: the code of "
                          "llm_logits_projection_softmax)")
    first, _ = asked("HEAD~2", "HEAD", whole_modules=True)
    assert first.endswith(f"measured {', '.join(LLM)} (workloads/llm.py changed)")


def test_trial_t12_s_patch_reaches_the_three_workloads_it_planted_in_llm_py(tmp_path: Path) -> None:
    # tests/fixtures/h100-plant-truth/plant-t12.patch: the logits projection's vocabulary, one more op in rope and the
    # KL loss's columns; llm_qk_norm, its control, and the module's seven other workloads are left alone
    _git(tmp_path, "init", "-q")
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "llm.py").write_text(LLM_PY)
    patch = ROOT / "tests" / "fixtures" / "h100-plant-truth" / "plant-t12.patch"
    _git(tmp_path, "apply", "--include=workloads/llm.py", str(patch))
    planted = (tmp_path / "workloads" / "llm.py").read_text()
    assert reached(LLM_PY, planted, LLM) == {"llm_logits_projection_softmax", "llm_rope_apply",
                                             "llm_kl_divergence_loss"}
