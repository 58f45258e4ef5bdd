"""The 23 workloads match docs/workloads.md: shapes, dtypes, domains, decode-invariance (checked on `meta`)."""

from __future__ import annotations

import pytest
import torch

from workloads import registry
from workloads.names import DECODE_INVARIANT, MODES, WORKLOAD_NAMES
from workloads.presets import get_preset

BF16, I64, F32 = torch.bfloat16, torch.int64, torch.float32

# (input shapes, output shapes) per workload, prefill then decode, copied from docs/workloads.md's table.
SPEC: dict[str, dict[str, tuple[list[tuple[int, ...]], list[tuple[int, ...]]]]] = {
    "llm_rmsnorm": {"prefill": ([(16, 2048, 2048), (2048,)], [(16, 2048, 2048)]),
                    "decode": ([(64, 1, 2048), (2048,)], [(64, 1, 2048)])},
    "llm_layernorm": {"prefill": ([(16, 2048, 2048), (2048,), (2048,)], [(16, 2048, 2048)]),
                      "decode": ([(64, 1, 2048), (2048,), (2048,)], [(64, 1, 2048)])},
    "llm_swiglu_mlp": {"prefill": ([(32768, 2048), (2048, 5504), (2048, 5504), (5504, 2048)], [(32768, 2048)]),
                       "decode": ([(64, 2048), (2048, 5504), (2048, 5504), (5504, 2048)], [(64, 2048)])},
    "llm_gelu_mlp": {"prefill": ([(32768, 2048), (2048, 5504), (5504, 2048)], [(32768, 2048)]),
                     "decode": ([(64, 2048), (2048, 5504), (5504, 2048)], [(64, 2048)])},
    "llm_rope_apply": {"prefill": ([(16, 2048, 16, 128), (2048, 128), (2048, 128)], [(16, 2048, 16, 128)]),
                       "decode": ([(64, 1, 16, 128), (1, 128), (1, 128)], [(64, 1, 16, 128)])},
    "llm_logits_projection_softmax": {"prefill": ([(32768, 2048), (2048, 32768)], [(32768, 32768)]),
                                      "decode": ([(64, 2048), (2048, 32768)], [(64, 32768)])},
    "llm_topk_sampling_prep": {"prefill": ([(32768, 32768)], [(32768, 1)]), "decode": ([(64, 32768)], [(64, 1)])},
    "llm_moe_router": {"prefill": ([(32768, 2048), (2048, 64)], [(32768, 2), (32768, 2)]),
                       "decode": ([(64, 2048), (2048, 64)], [(64, 2), (64, 2)])},
    "llm_qk_norm": {"prefill": ([(16, 16, 2048, 128)] * 2, [(16, 16, 2048, 128)] * 2),
                    "decode": ([(64, 16, 1, 128)] * 2, [(64, 16, 1, 128)] * 2)},
    "vlm_patch_embedding_conv2d": {"prefill": ([(8, 3, 448, 448), (1024, 3, 14, 14)], [(8, 1024, 1024)]),
                                   "decode": ([(8, 3, 224, 224), (1024, 3, 14, 14)], [(8, 256, 1024)])},
    "vlm_vit_mlp_block": {
        "prefill": ([(8, 1024, 1024), (1024,), (1024,), (1024, 4096), (4096, 1024)], [(8, 1024, 1024)]),
        "decode": ([(8, 196, 1024), (1024,), (1024,), (1024, 4096), (4096, 1024)], [(8, 196, 1024)])},
    "vlm_vision_rmsnorm_pool": {"prefill": ([(8, 1024, 1024), (1024,)], [(8, 1024)]),
                                "decode": ([(8, 196, 1024), (1024,)], [(8, 1024)])},
    "vlm_contrastive_nce_loss": {"prefill": ([(256, 1024), (256, 1024)], [()])},
    "diff_unet_resblock": {
        "prefill": ([(8, 320, 64, 64), (8, 320, 64, 64), (320, 320, 3, 3), (320, 320, 3, 3)], [(8, 320, 64, 64)]),
        "decode": ([(8, 320, 32, 32), (8, 320, 32, 32), (320, 320, 3, 3), (320, 320, 3, 3)], [(8, 320, 32, 32)])},
    "diff_vae_decoder_upsample": {
        "prefill": ([(8, 256, 64, 64), (256, 256, 3, 3), (128, 256, 3, 3)], [(8, 128, 128, 128)])},
    "diff_time_embedding_mlp": {"prefill": ([(8,), (320, 1280), (1280, 1280)], [(8, 1280)])},
    "diff_cfg_blend": {"prefill": ([(8, 4, 128, 128), (8, 4, 128, 128)], [(8, 4, 128, 128)]),
                       "decode": ([(8, 4, 64, 64), (8, 4, 64, 64)], [(8, 4, 64, 64)])},
    "diff_scheduler_step": {"prefill": ([(8, 4, 128, 128), (8, 4, 128, 128), (8,)], [(8, 4, 128, 128)]),
                            "decode": ([(8, 4, 64, 64), (8, 4, 64, 64), (8,)], [(8, 4, 64, 64)])},
    "llm_label_smoothed_ce_loss": {"prefill": ([(32768, 32768), (32768,)], [()]),
                                   "decode": ([(64, 32768), (64,)], [()])},
    "llm_kl_divergence_loss": {"prefill": ([(32768, 32768)] * 2, [()]), "decode": ([(64, 32768)] * 2, [()])},
    "rl_ppo_clipped_loss": {"prefill": ([(32768,)] * 3, [()]), "decode": ([(64,)] * 3, [()])},
    "rl_dpo_loss": {"prefill": ([(512,)] * 4, [()])},
    "rl_grpo_loss": {"prefill": ([(512,)] * 3, [()])},
}
# Tensors that are not bf16 (docs/workloads.md: "dtype bf16 for every tensor unless said otherwise").
OTHER_DTYPES = {("llm_label_smoothed_ce_loss", "in", 1): I64, ("diff_time_embedding_mlp", "in", 0): F32,
                ("llm_topk_sampling_prep", "out", 0): I64, ("llm_moe_router", "out", 1): I64}
DOMAINS = {"llm": 11, "vlm": 4, "diffusion": 5, "rl": 3}


def test_there_are_exactly_the_23_workloads_of_the_study_in_its_order() -> None:
    assert [w.name for w in registry.WORKLOADS] == list(WORKLOAD_NAMES) == list(SPEC)
    assert {d: sum(w.domain == d for w in registry.WORKLOADS) for d in DOMAINS} == DOMAINS
    assert MODES == ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def test_the_five_decode_invariant_workloads_are_measured_in_prefill_only() -> None:
    assert {w.name for w in registry.WORKLOADS if w.decode_invariant} == set(DECODE_INVARIANT)
    assert len(registry.instances("prefill")) == 23 and len(registry.instances("decode")) == 18
    assert sum(len(registry.instances(p)) for p in ("prefill", "decode")) == 41


@pytest.mark.parametrize("preset", ["prefill", "decode"])
@pytest.mark.parametrize("name", list(SPEC))
def test_shapes_and_dtypes_follow_the_spec_table(name: str, preset: str) -> None:
    if preset not in SPEC[name]:
        assert not registry.get(name).applies_to(preset)
        return
    fn, args, kwargs = registry.get(name).build(get_preset(preset), "meta")
    outs = fn(*args, **kwargs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    ins = [a for a in args if isinstance(a, torch.Tensor)]
    want_in, want_out = SPEC[name][preset]
    assert [tuple(t.shape) for t in ins] == want_in
    assert [tuple(t.shape) for t in outs] == want_out
    for kind, tensors in (("in", ins), ("out", outs)):
        for i, t in enumerate(tensors):
            assert t.dtype == OTHER_DTYPES.get((name, kind, i), BF16), (name, kind, i)


def test_cfg_blend_scale_is_a_python_float_and_rope_tables_are_bf16() -> None:
    _, args, _ = registry.get("diff_cfg_blend").build(get_preset("prefill"), "meta")
    assert args[2] == 7.5 and isinstance(args[2], float)
    _, args, _ = registry.get("llm_rope_apply").build(get_preset("decode"), "meta")
    assert args[1].dtype == args[2].dtype == BF16


def test_inputs_are_seeded_so_two_builds_are_identical() -> None:
    w, p = registry.get("llm_rmsnorm"), get_preset("tiny")
    (_, a, _), (_, b, _) = w.build(p), w.build(p)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_every_workload_declares_positive_work_for_roofline_figures() -> None:
    p = get_preset("prefill")
    rms = registry.get("llm_rmsnorm")
    assert rms.min_bytes(p) == 2 * (2 * 16 * 2048 * 2048) + 2 * 2048  # x in, out, and w: bf16
    for w in registry.WORKLOADS:
        assert w.flops(p) > 0 and w.min_bytes(p) > 0, w.name
    swiglu = registry.get("llm_swiglu_mlp")
    assert swiglu.flops(p) >= 3 * 2 * 32768 * 2048 * 5504  # three GEMMs dominate


def test_unknown_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(KeyError, match="llm_rmsnorm"):
        registry.get("llm_rmsnrom")
    with pytest.raises(KeyError, match="prefill"):
        registry.instances("prefil")
