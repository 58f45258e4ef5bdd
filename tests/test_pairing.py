"""The paired record's store side (tracker.store.pairing): what two runs' cell stores pair, and what a resumed PR
forgets so that each pair is measured together. The records are constructed (a latency and a GPU a replicate)."""

from __future__ import annotations

from pathlib import Path

from tracker.measure.cellresult import CellResult
from tracker.store import pairing
from tracker.store.cells import CellStore, RunKey

BASE, HEAD, MACHINE, TORCH = "b" * 40, "h" * 40, "m", "2.11.0+cu130"
NORM, ROPE, KERNEL = ("decode", "llm_rmsnorm", "default"), ("decode", "llm_rope_apply", "eager"), (
    "decode", "llm_rmsnorm", "kernel:triton_rmsnorm")


def _store(root: Path, commit: str, held: dict[tuple[str, str, str], list[str]]) -> None:
    """Each cell's replicates 1, 2, ... on the GPUs listed."""
    store = CellStore(root, RunKey(MACHINE, commit, TORCH))
    for (preset, workload, mode), on in held.items():
        for r, gpu in enumerate(on, 1):
            store.put(CellResult(preset, workload, mode, "cuda", "ok", samples_ms=[0.1], median_ms=0.1,
                                 p25_ms=0.1, compile_s=1.0, replicate=r, gpu_index=gpu))


def _held(root: Path, commit: str, cell: tuple[str, str, str]) -> list[str | None]:
    return [r.gpu_index for r in CellStore(root, RunKey(MACHINE, commit, TORCH)).replicates(*cell)]


def test_a_resumed_pr_forgets_what_one_side_holds_beyond_the_other_so_each_pair_is_measured_on_one_gpu(
        tmp_path: Path) -> None:
    # interrupted in its second round: the base's compiles 4 and 5 of NORM stored (GPU 0), the head's not yet; ROPE's
    # first round stored at head only
    _store(tmp_path, BASE, {NORM: ["0", "0", "0", "0", "0"], KERNEL: ["1"]})
    _store(tmp_path, HEAD, {NORM: ["0", "0", "0"], ROPE: ["2", "2", "2"], KERNEL: ["1", "1"]})
    forgotten = pairing.drop_unpaired(tmp_path, MACHINE, TORCH, BASE, HEAD, ["llm_rmsnorm", "llm_rope_apply"])
    assert forgotten == 2 + 3 + 1
    assert _held(tmp_path, BASE, NORM) == _held(tmp_path, HEAD, NORM) == ["0", "0", "0"]
    assert _held(tmp_path, HEAD, ROPE) == [] and _held(tmp_path, HEAD, KERNEL) == ["1"]
    record = pairing.from_stores(tmp_path, MACHINE, TORCH, BASE, HEAD, [NORM, KERNEL])
    assert all(p.base_gpu == p.head_gpu for c in (NORM, KERNEL) for p in record.pairs(c))
    assert pairing.drop_unpaired(tmp_path, MACHINE, TORCH, BASE, HEAD, ["llm_rmsnorm", "llm_rope_apply"]) == 0


def test_a_gap_in_one_side_s_replicates_ends_its_pairs_there(tmp_path: Path) -> None:
    _store(tmp_path, BASE, {NORM: ["0", "0", "0", "0"]})
    _store(tmp_path, HEAD, {NORM: ["0", "0", "1", "1"]})
    CellStore(tmp_path, RunKey(MACHINE, BASE, TORCH)).remove(*NORM, 3)  # its third compile measured again alone, say
    assert pairing.drop_unpaired(tmp_path, MACHINE, TORCH, BASE, HEAD, ["llm_rmsnorm"]) == 1 + 2
    assert _held(tmp_path, BASE, NORM) == _held(tmp_path, HEAD, NORM) == ["0", "0"]
    assert CellStore(tmp_path, RunKey(MACHINE, BASE, TORCH)).replicate(*NORM, 4) is None  # past the gap: forgotten


def test_what_one_side_alone_holds_stays_where_it_may_be_a_baseline_measured_once_or_its_workload_is_not_paired(
        tmp_path: Path) -> None:
    _store(tmp_path, BASE, {KERNEL: ["1", "1"]})
    _store(tmp_path, HEAD, {NORM: ["0", "0", "0"], ROPE: ["2"], KERNEL: ["1", "1", "1"]})
    # a kernel-only change: the modes' cells measured at head once for both sides
    assert pairing.drop_unpaired(tmp_path, MACHINE, TORCH, BASE, HEAD, ["llm_rmsnorm"], one_sided=False) == 1
    assert _held(tmp_path, HEAD, NORM) == ["0", "0", "0"] and _held(tmp_path, HEAD, KERNEL) == ["1", "1"]
    assert _held(tmp_path, HEAD, ROPE) == ["2"]  # a workload not measured in pairs (new at head, say)
