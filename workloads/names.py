"""The names of presets and workloads (and, from workloads.modes, of modes), importable without torch.

asv imports the benchmark suite in every benchmark process; keeping the names torch-free keeps a cell
whose result is already stored cheap to report."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping

from workloads.errors import UnknownName
from workloads.modes import MODES  # the modes themselves are data: workloads.modes

PRESET_NAMES: tuple[str, ...] = ("prefill", "decode", "tiny")

# docs/workloads.md order: llm, vlm, diffusion, then the two LLM losses and the RL losses.
WORKLOAD_NAMES: tuple[str, ...] = (
    "llm_rmsnorm", "llm_layernorm", "llm_swiglu_mlp", "llm_gelu_mlp", "llm_rope_apply",
    "llm_logits_projection_softmax", "llm_topk_sampling_prep", "llm_moe_router", "llm_qk_norm",
    "vlm_patch_embedding_conv2d", "vlm_vit_mlp_block", "vlm_vision_rmsnorm_pool", "vlm_contrastive_nce_loss",
    "diff_unet_resblock", "diff_vae_decoder_upsample", "diff_time_embedding_mlp", "diff_cfg_blend",
    "diff_scheduler_step", "llm_label_smoothed_ce_loss", "llm_kl_divergence_loss", "rl_ppo_clipped_loss",
    "rl_dpo_loss", "rl_grpo_loss",
)

# Same shapes in both presets: the study measures these five in prefill only.
DECODE_INVARIANT: frozenset[str] = frozenset(
    {"vlm_contrastive_nce_loss", "diff_vae_decoder_upsample", "diff_time_embedding_mlp", "rl_dpo_loss", "rl_grpo_loss"}
)


DOMAINS: tuple[str, ...] = ("llm", "vlm", "diffusion", "rl")
# A workload's name says its domain (the study's naming; its CE and KL losses are llm_): the tracker reads
# domains from result files without importing the workloads, and each Workload's declared domain must agree.
DOMAIN_PREFIXES: dict[str, str] = {"llm_": "llm", "vlm_": "vlm", "diff_": "diffusion", "rl_": "rl"}


# Plugin workloads (workloads.plugins) are named `namespace.name`, the namespace being their entry point's name:
# a dot never occurs in the study's names, so the two never collide, and it is safe in a cell-store path, an asv
# parameter, a `workload:candidate` key and a command line.
NAMESPACE_SEP = "."
NAMESPACE = re.compile(r"[a-z][a-z0-9_]*")
PLUGIN_WORKLOAD = re.compile(r"([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)")


# The plugins to load, by entry-point name (a workload plugin's namespace), comma-separated: unset, every installed
# plugin; set, only those named (empty: none). The project's tests set it, so that what else is installed beside
# them (a user's kernel repository) changes nothing they see.
ENV_PLUGINS = "COMPILE_BASELINES_PLUGINS"


def plugin_enabled(name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the plugin whose entry point is named `name` is loaded (ENV_PLUGINS)."""
    listed = environ.get(ENV_PLUGINS)
    return listed is None or name in {n.strip() for n in listed.split(",")}


def is_plugin_workload(workload: str) -> bool:
    """Whether `workload` is a plugin's name (namespaced), not one of the study's."""
    return NAMESPACE_SEP in workload


def check_plugin_workload(workload: str, namespace: str) -> str:
    """`workload` if it is a valid name in `namespace` (`namespace.name`), else ValueError saying why."""
    m = PLUGIN_WORKLOAD.fullmatch(workload)
    if m is None or m.group(1) != namespace:
        raise ValueError(f"workload {workload!r} of plugin {namespace!r}: name it {namespace}.<name>, the name in "
                         "lower-case letters, digits and _ (the namespace keeps it apart from every other workload)")
    return workload


def domain_of(workload: str) -> str:
    if is_plugin_workload(workload):
        raise KeyError(f"workload {workload!r} is a plugin's: its domain is declared (workloads.catalog.domain)")
    for prefix, domain in DOMAIN_PREFIXES.items():
        if workload.startswith(prefix):
            return domain
    raise KeyError(f"workload {workload!r} has no known domain prefix ({', '.join(DOMAIN_PREFIXES)})")


def unknown_name(kind: str, name: str, known: tuple[str, ...], listing: str | None = None) -> UnknownName:
    """The error for a name that is not one of `known`: the closest ones first (a typo's fix), then `listing` (what
    to choose from; default: every known name)."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return UnknownName(f"unknown {kind} {name!r}{hint}; choose from {listing or ', '.join(known)}")


def check_name(kind: str, name: str, known: tuple[str, ...]) -> str:
    if name not in known:
        raise unknown_name(kind, name, known)
    return name


def check_mode(mode: str) -> str:
    return check_name("mode", mode, MODES)


def check_preset(preset: str) -> str:
    return check_name("preset", preset, PRESET_NAMES)


def check_workload(workload: str) -> str:
    return check_name("workload", workload, WORKLOAD_NAMES)


def applies(preset: str, workload: str) -> bool:
    """Whether the study measures `workload` in `preset`: every one in prefill and tiny, all but DECODE_INVARIANT's
    in decode."""
    return not (preset == "decode" and workload in DECODE_INVARIANT)
