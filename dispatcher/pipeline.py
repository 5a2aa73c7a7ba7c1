"""A candidate is a whole pipeline: [q-quant] -> attention kernel -> [out-quant], with the kernel's tactic."""
from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .device import DeviceInfo
from .problem import AttentionProblem
from .registry import KernelSpec, combos_for, ineligibility_reasons, mask_reasons

Tactic = tuple[tuple[str, Any], ...]     # a kernel's knob settings, sorted by knob

@dataclass(frozen=True)
class Pipeline:
    kernel: str
    q_dtype: str              # the dtype the kernel reads the query in ("fp8" after a q-quant op)
    kv_dtype: str
    kernel_out_dtype: str     # what the kernel writes; "fp8" = fused out-quant
    q_quant: bool = False
    out_quant: bool = False   # a separate FP8 quant op after the kernel
    tactic: Tactic = ()

    @property
    def fused_out_quant(self) -> bool:
        return self.kernel_out_dtype == "fp8"

    @cached_property
    def id(self) -> str:      # remembered: the model reads it millions of times in an adaptive search
        s = self.kernel
        if self.tactic:
            s += "[" + ",".join(f"{k}={_fmt(v)}" for k, v in self.tactic) + "]"
        if self.q_quant:
            s += "+q-quant"
        if self.fused_out_quant:
            s += "+fused-out"
        elif self.out_quant:
            s += "+out-quant"
        return s

    def tactic_dict(self) -> dict[str, Any]:
        return dict(self.tactic)

    def to_row(self) -> dict[str, Any]:
        return {"pipeline": self.id, "kernel": self.kernel, "kernel_q_dtype": self.q_dtype,
                "kernel_out_dtype": self.kernel_out_dtype, "q_quant": int(self.q_quant),
                "out_quant": int(self.out_quant), "tactic": json.dumps(self.tactic_dict(), sort_keys=True)}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Pipeline:
        tactic = tuple(sorted(json.loads(row["tactic"] or "{}").items()))
        return cls(kernel=row["kernel"], q_dtype=row["kernel_q_dtype"], kv_dtype=row["kv_dtype"],
                   kernel_out_dtype=row["kernel_out_dtype"], q_quant=bool(row["q_quant"]),
                   out_quant=bool(row["out_quant"]), tactic=tactic)


def _fmt(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def tactics_of(spec: KernelSpec, device: DeviceInfo, all_tactics: bool = True) -> list[Tactic]:
    space = spec.tactic_space(device.kind)
    if not space:
        return [()]
    names = sorted(space)
    if not all_tactics:
        return [tuple((n, space[n][0]) for n in names)]
    return [tuple(zip(names, values)) for values in itertools.product(*(space[n] for n in names))]


def default_tactic(spec: KernelSpec, problem: AttentionProblem, device: DeviceInfo) -> Tactic:
    """The kernel's default setting (each knob's first value), or where that takes no attention mask the
    problem needs (kernels.toml's `maskless`), the first setting in grid order that takes one."""
    first = tactics_of(spec, device, all_tactics=False)[0]
    if not spec.maskless or not mask_reasons(spec, dict(first), problem, device):
        return first
    return next((t for t in tactics_of(spec, device) if not mask_reasons(spec, dict(t), problem, device)), first)


def split_pages(pipe: Pipeline) -> int:
    """The KV pages of a fixed split-KV plan's chunks; 0: the planner's own split."""
    return int(pipe.tactic_dict().get("fixed_split_size", 0) or 0)


def fixed_split(pipe: Pipeline) -> bool:
    """A split-KV plan of fixed chunk size (see predictor.ragged_prior for what it costs a mixed batch)."""
    return split_pages(pipe) > 0


def pipelines_for(spec: KernelSpec, problem: AttentionProblem, device: DeviceInfo,
                  all_tactics: bool = True) -> list[Pipeline]:
    """Every pipeline through `spec` that serves the problem; empty when the kernel is ineligible. (A
    tactic some sizes cannot plan, registry.tactic_reasons, is in: the sweep records FlashInfer's
    refusal, and the dispatcher leaves it out where the asked problem needs it.)"""
    if ineligibility_reasons(spec, problem, device):
        return []
    tactics = tactics_of(spec, device) if all_tactics else [default_tactic(spec, problem, device)]
    out = []
    for combo, q_quant, out_quant in combos_for(spec, problem):
        for tactic in tactics:
            out.append(Pipeline(spec.id, combo.q, combo.kv, combo.out, q_quant, out_quant, tactic))
    return out


def candidates(registry: dict[str, KernelSpec], problem: AttentionProblem, device: DeviceInfo,
               all_tactics: bool = True) -> list[Pipeline]:
    return [p for spec in registry.values() for p in pipelines_for(spec, problem, device, all_tactics)]
