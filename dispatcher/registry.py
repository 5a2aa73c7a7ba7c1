"""Kernel capabilities as data (kernels.toml) and the reasons a kernel cannot serve a problem."""
from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .balance import tiered
from .device import DeviceInfo
from .problem import DTYPES, PHASES, AttentionProblem

BUILTIN = Path(__file__).with_name("kernels.toml")
FAMILIES = ("trtllm", "flashattention", "reference")
RAGGED = ("total", "longest")


class RegistryError(ValueError):
    pass


@dataclass(frozen=True)
class Combo:
    q: str
    kv: str
    out: str


Knobs = tuple[tuple[str, tuple[Any, ...]], ...]     # (knob, values), the first value the default


@dataclass(frozen=True)
class SplitRule:
    """How a kernel cuts each request's KV into CTAs from the batch alone (`split_kv` in kernels.toml):
    round(floor(sm_multiple x SMs / (batch x KV heads)) x factor) CTAs per request and KV head, at
    least 1 (sm_multiple 0: never splits), at most one per `tile` tokens of the longest request.
    `waves`: what CTAs beyond one per SM cost, "whole" (a second wave), "shared" (SMs running several
    share their bandwidth) or "resident" (more on the busiest SM run beside each other, at a fraction
    of a wave: PredictorConfig.resident_step). `compute_capability`: the one architecture whose
    launcher this is (0: any)."""
    sm_multiple: int = 1
    factor: float = 1.0
    tile: int = 1
    waves: str = "shared"
    compute_capability: int = 0

    def splits(self, batch: int, kv_heads: int, longest: int, sms: int) -> int:
        wanted = math.floor((self.sm_multiple * sms // (batch * kv_heads)) * self.factor + 0.5)   # C's round()
        return max(1, min(wanted, -(-longest // self.tile)))

    def fill(self, batch: int, kv_heads: int, longest: int, sms: int) -> float:
        """CTAs over SMs: above 1, some SM runs more than one."""
        return batch * kv_heads * self.splits(batch, kv_heads, longest, sms) / sms

    def busiest_sm(self, batch: int, kv_heads: int, longest: int, sms: int) -> float:
        """The busiest SM's CTAs times each one's share of a request's KV."""
        return math.ceil(self.fill(batch, kv_heads, longest, sms)) / self.splits(batch, kv_heads, longest, sms)

    def work_per_sm(self, batch: int, kv_heads: int, longest: int, sms: int) -> float:
        """The busiest SM's work in whole requests' KV, an SM's CTA at least: where the time goes once
        KV is long (SMs beyond the CTAs idle)."""
        if self.waves == "whole":
            return self.busiest_sm(batch, kv_heads, longest, sms)
        return max(self.fill(batch, kv_heads, longest, sms), 1.0) / self.splits(batch, kv_heads, longest, sms)

    def applies_to(self, compute_capability: int) -> bool:
        return self.compute_capability in (0, compute_capability)


@dataclass(frozen=True)
class KernelSpec:
    id: str
    family: str
    library: str
    entry_point: str
    phases: tuple[str, ...]
    device_kinds: tuple[str, ...]
    combos: tuple[Combo, ...]
    compute_capabilities: tuple[int, ...] | None = None   # None: any
    q_quant: bool = False              # accepts an FP8 query produced by a q-quant op
    separate_out_quant: bool = True    # FP8 output may come from a separate quant op
    head_dims: tuple[int, ...] | None = None
    page_sizes: tuple[int, ...] | None = None
    group_sizes: tuple[tuple[str, tuple[int, ...]], ...] = ()   # per phase
    window: bool = False
    sinks: bool = False
    noncausal: bool = True
    ragged: str = "total"              # a mixed batch costs as its total ("total") or its longest request ("longest")
    split_kv: tuple[tuple[str, SplitRule], ...] = ()   # per KV dtype: how it splits a decode batch
    graph_split_ctas_per_sm: int = 0   # a fixed split's CUDA-graph plan holds this many CTAs per SM (0: no limit)
    tactics: tuple[tuple[str, Knobs], ...] = ()  # per device kind
    tune: tuple[tuple[str, Knobs], ...] = ()     # per device kind, for Optuna
    maskless: tuple[tuple[str, Knobs], ...] = ()  # per device kind: tactic values that take no attention mask
    notes: str = ""

    def tactic_space(self, device_kind: str) -> dict[str, tuple[Any, ...]]:
        return dict(dict(self.tactics).get(device_kind, ()))

    def tune_space(self, device_kind: str) -> dict[str, tuple[Any, ...]]:
        """The knobs a per-problem search explores: `tune` where declared, else `tactics`."""
        return dict(dict(self.tune).get(device_kind, ())) or self.tactic_space(device_kind)

    def split_rule(self, kv_dtype: str) -> SplitRule | None:
        return dict(self.split_kv).get(kv_dtype)

    def groups_for(self, phase: str) -> tuple[int, ...] | None:
        return dict(self.group_sizes).get(phase)


def _tuple(v: list[Any] | None) -> tuple[Any, ...] | None:
    return None if v is None else tuple(v)


def _spec(entry: dict[str, Any], source: str) -> KernelSpec:
    where = f"kernel {entry.get('id', '?')!r} in {source}"
    for k in ("id", "family", "phases", "device_kinds", "combos"):
        if k not in entry:
            raise RegistryError(f"{where} lacks {k!r}; every kernel declares id, family, phases, device_kinds, combos")
    if entry["family"] not in FAMILIES:
        raise RegistryError(f"{where}: family {entry['family']!r} is not one of {', '.join(FAMILIES)}")
    if entry.get("ragged", "total") not in RAGGED:
        raise RegistryError(f"{where}: ragged {entry['ragged']!r} is not one of {', '.join(RAGGED)}")
    bad = [p for p in entry["phases"] if p not in PHASES]
    if bad:
        raise RegistryError(f"{where}: phase {bad[0]!r} is not one of {', '.join(PHASES)}")
    combos = []
    for text in entry["combos"]:
        parts = text.split("/")
        if len(parts) != 3 or any(p not in DTYPES for p in parts):
            raise RegistryError(f"{where}: combo {text!r} is not 'q/kv/out' with dtypes from {', '.join(DTYPES)}")
        combos.append(Combo(*parts))
    tactics, tune, maskless = (tuple((kind, tuple((k, tuple(v)) for k, v in knobs.items()))
                                     for kind, knobs in entry.get(field, {}).items())
                               for field in ("tactics", "tune", "maskless"))
    for kind, knobs in maskless:
        space = dict(dict(tactics).get(kind, ()))
        for k, values in knobs:
            if bad := [v for v in values if v not in space.get(k, ())]:
                raise RegistryError(f"{where}: maskless.{kind}.{k} names {bad[0]!r}, not one of tactics.{kind}.{k} "
                                    f"{list(space.get(k, ()))}")
    for kind, knobs in tune:
        default = dict(dict(tactics).get(kind, ()))
        for k, values in knobs:
            if k in default and default[k][0] != values[0]:
                raise RegistryError(f"{where}: tune.{kind}.{k} must start with the kernel's default "
                                    f"{default[k][0]!r} (the first of tactics.{kind}.{k}), not {values[0]!r}")
    split_kv = tuple((dt, _split_rule(rule, f"{where}: split_kv.{dt}", _tuple(entry.get("compute_capabilities"))))
                     for dt, rule in entry.get("split_kv", {}).items())
    return KernelSpec(
        id=entry["id"], family=entry["family"], library=entry.get("library", ""),
        entry_point=entry.get("entry_point", ""), phases=tuple(entry["phases"]),
        device_kinds=tuple(entry["device_kinds"]), combos=tuple(combos),
        compute_capabilities=_tuple(entry.get("compute_capabilities")),
        q_quant=entry.get("q_quant", False), separate_out_quant=entry.get("separate_out_quant", True),
        head_dims=_tuple(entry.get("head_dims")), page_sizes=_tuple(entry.get("page_sizes")),
        group_sizes=tuple((p, tuple(g)) for p, g in entry.get("group_sizes", {}).items()),
        window=entry.get("window", False), sinks=entry.get("sinks", False),
        noncausal=entry.get("noncausal", True), ragged=entry.get("ragged", "total"), split_kv=split_kv,
        graph_split_ctas_per_sm=entry.get("graph_split_ctas_per_sm", 0),
        tactics=tactics, tune=tune, maskless=maskless,
        notes=entry.get("notes", "").strip(),
    )


SPLIT_WAVES = ("whole", "shared", "resident")


def _split_rule(rule: dict[str, Any], where: str, capabilities: tuple[int, ...] | None) -> SplitRule:
    names = {"sm_multiple", "factor", "tile", "waves", "compute_capability"}
    if not isinstance(rule, dict):
        raise RegistryError(f"{where} must be a table of {', '.join(sorted(names))}, not {rule!r}")
    if set(rule) - names:
        raise RegistryError(f"{where}: {sorted(set(rule) - names)[0]!r} is not a field; the fields are "
                            f"{', '.join(sorted(names))}")
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {   # field: (holds, what it must be)
        "sm_multiple": (lambda v: _whole(v) and v >= 0, "a whole number, 0 (never splits) or more"),
        "factor": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0, "a number above 0"),
        "tile": (lambda v: _whole(v) and v >= 1, "a whole number of tokens, 1 or more"),
        "waves": (lambda v: v in SPLIT_WAVES, "one of " + ", ".join(repr(w) for w in SPLIT_WAVES)),
        "compute_capability": (lambda v: _whole(v) and (v == 0 or capabilities is None or v in capabilities),
                               "0 (any) or one of the kernel's compute_capabilities "
                               f"{', '.join(map(str, capabilities or ()))} (90 for SM90)"),
    }
    for name, value in rule.items():
        holds, must = checks[name]
        if not holds(value):
            raise RegistryError(f"{where}: {name} = {value!r} must be {must}")
    return SplitRule(**rule)


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise RegistryError(f"kernel registry {str(path)!r} does not exist; check SWITCHYARD_KERNELS or "
                            "--kernels") from None
    except tomllib.TOMLDecodeError as e:
        raise RegistryError(f"kernel registry {str(path)!r} is not valid TOML: {e}") from None
    kernels: list[dict[str, Any]] = data.get("kernel", [])
    return kernels


def load_registry(extra: str | None = None) -> dict[str, KernelSpec]:
    """The built-in kernels, then entries of `extra` (or $SWITCHYARD_KERNELS) added or overriding by id."""
    entries = {e["id"]: (e, str(BUILTIN)) for e in _read(BUILTIN)}
    extra = extra or os.environ.get("SWITCHYARD_KERNELS")
    if extra:
        for e in _read(Path(extra)):
            base = entries.get(e.get("id"), ({}, ""))[0]
            entries[e.get("id")] = ({**base, **e}, extra)
    return {k: _spec(e, src) for k, (e, src) in entries.items()}


def ineligibility_reasons(spec: KernelSpec, problem: AttentionProblem, device: DeviceInfo) -> list[str]:
    """Why `spec` cannot serve `problem` on `device`; empty when it can."""
    p, reasons = problem, []
    if p.phase not in spec.phases:
        reasons.append(f"no {p.phase} kernel (phases: {', '.join(spec.phases)})")
    if device.kind not in spec.device_kinds:
        reasons.append(f"does not run on {device.kind} (runs on {', '.join(spec.device_kinds)})")
    elif device.kind == "cuda" and spec.compute_capabilities and device.sm not in spec.compute_capabilities:
        sms = ", ".join(f"SM{c}" for c in spec.compute_capabilities)
        reasons.append(f"needs {sms}; {device.name} is SM{device.sm}")
    if spec.head_dims and p.head_dim not in spec.head_dims:
        reasons.append(f"head_dim {p.head_dim} not supported (supports {list(spec.head_dims)})")
    if spec.page_sizes and p.page_size not in spec.page_sizes:
        reasons.append(f"page_size {p.page_size} not supported (supports {list(spec.page_sizes)})")
    groups = spec.groups_for(p.phase)
    if groups and p.group_size not in groups:
        reasons.append(f"GQA group size {p.group_size} ({p.num_qo_heads}/{p.num_kv_heads} heads) not supported "
                       f"in {p.phase} (supports {list(groups)})")
    if p.has_sinks and not spec.sinks:
        reasons.append("attention sinks not supported")
    if p.window_left >= 0 and not spec.window:
        reasons.append("sliding window not supported")
    if not p.causal and not spec.noncausal:
        reasons.append("non-causal attention not supported")
    if not combos_for(spec, p):
        have = ", ".join(f"{c.q}/{c.kv}/{c.out}" for c in spec.combos)
        reasons.append(f"no dtype path for q/kv/out {p.q_dtype}/{p.kv_dtype}/{p.out_dtype} (kernel takes {have}"
                       f"{'; q-quant allowed' if spec.q_quant else ''})")
    return reasons


PLAN_MARGIN = 0.95   # a mixed batch whose lengths are not given: its chunk count is estimated, so keep clear


def mask_reasons(spec: KernelSpec, tactic: dict[str, Any], problem: AttentionProblem,
                 device: DeviceInfo) -> list[str]:
    """Why `spec` with `tactic` cannot serve `problem` on `device` for want of an attention mask (kernels.toml's
    `maskless`). Certain, unlike a plan limit: the sweep stores the pipeline as unsupported without running it."""
    hit = [(k, values) for k, values in dict(spec.maskless).get(device.kind, ()) if tactic.get(k) in values]
    need = mask_need(problem) if hit else None      # most kernels declare none: choose()'s misses pass here
    if need is None:
        return []
    space = dict(dict(spec.tactics).get(device.kind, ()))
    out = []
    for k, values in hit:
        others = ", ".join(f"{k}={v}" for v in space.get(k, ()) if v not in values)
        out.append(f"{spec.id} {k}={tactic[k]} on {device.kind} takes no attention mask, and {need} needs one"
                   + (f"; {others} take{'s' * (',' not in others)} one" if others else ""))
    return out


def mask_need(p: AttentionProblem) -> str | None:
    """What in `p` needs an attention mask (as tuner/runners/torch_sdpa.py builds one), or None."""
    if p.window_left >= 0:
        return f"a sliding window ({p.window_left} tokens)"
    if p.causal and p.q_len > 1:
        return f"causal attention over {p.q_len} new tokens"
    if p.max_kv_len != p.kv_len or (p.seq_lens is not None and len(set(p.seq_lens)) > 1):
        return "a batch of requests of mixed lengths"
    return None


def tactic_reasons(spec: KernelSpec, tactic: dict[str, Any], problem: AttentionProblem,
                   device: DeviceInfo) -> list[str]:
    """Why `spec` with `tactic` cannot serve `problem` on `device` though the kernel can; empty when it can."""
    if masked := mask_reasons(spec, tactic, problem, device):
        return masked
    fixed = int(tactic.get("fixed_split_size", 0) or 0)
    if not fixed or not spec.graph_split_ctas_per_sm or not device.sm_count or tactic.get("disable_split_kv"):
        return []
    p = problem
    need, room = graph_split_chunks(p, fixed, spec.graph_split_ctas_per_sm * device.sm_count)
    estimated = p.max_kv_len != p.kv_len and p.batch_size > 1 and p.seq_lens is None
    if need <= (room * PLAN_MARGIN if estimated else room):
        return []
    about = "about " if estimated else ""
    return [f"fixed_split_size={fixed} needs {about}{need} KV chunks at batch {p.batch_size} x kv {p.kv_len}; "
            f"FlashInfer's CUDA-graph plan holds {room} (use fixed_split_size 0 or a larger split)"]


def graph_split_chunks(p: AttentionProblem, fixed: int, max_ctas: int) -> tuple[int, int]:
    """(chunks needed, chunks held) of FlashInfer's CUDA-graph prefill plan (PrefillSplitQOKVIndptr)
    with a fixed split of `fixed` pages: a chunk per request, query tile and KV chunk (of the pages a
    sliding window reads), padded to max(max_ctas / KV heads, query tiles). Over: FlashInfer refuses
    the plan ("new batch size should not exceed padded batch size"). Exact for a uniform batch or one
    given by seq_lens; otherwise a mixed batch's count is estimated from its mean and longest request
    (under it where the other requests all sit just past a chunk's end: pass seq_lens to count them).
    Of 6124 plans measured on the H200 (112 refused) it tells 6122 right, missing two random mixed
    batches within 3% of the limit (benchmarks/results/split-rule/)."""
    tile, kv_chunks = _plan_counts(p, p.seq_lens)
    rows = p.batch_size * p.q_len
    need = -(-p.q_len * p.group_size // tile) * kv_chunks(fixed)
    return need, max(max_ctas // p.num_kv_heads, -(-rows * p.group_size // tile) + p.batch_size - 1)


def planned_chunk(p: AttentionProblem, max_ctas: int) -> int:
    """Tokens per KV chunk of FlashInfer's own CUDA-graph plan (PrefillBinarySearchKVChunkSize, no fixed
    split): the smallest chunk, 128 tokens at least, whose chunks (one per request, query tile and KV
    chunk) number at most max_ctas / KV heads; the longest request, which runs unsplit, where none does.
    At 8 KV heads on 132 SMs (33 chunks held), one 16000-token request among 31 short ones is cut in two;
    among 32 it is not, nor among 31 of which several are long. Lengths: seq_lens, else the layout of the
    batch's mean, longest and kv_balance that the sweep measures (balance.tiered)."""
    lens = p.seq_lens
    if lens is None and p.max_kv_len != p.kv_len:
        lens = tuple(tiered(p.batch_size, p.kv_len, p.max_kv_len, p.balance, p.q_len))
    tile, kv_chunks = _plan_counts(p, lens)
    tiles = -(-p.q_len * p.group_size // tile)
    held = max_ctas // p.num_kv_heads
    longest = max(lens) if lens else p.max_kv_len
    low, high = max(128 // p.page_size, 1), -(-longest // p.page_size)
    while low < high:
        mid = (low + high) // 2
        if tiles * kv_chunks(mid) > held:
            low = mid + 1
        else:
            high = mid
    return min(low * p.page_size, longest)


def _plan_counts(p: AttentionProblem, lens: tuple[int, ...] | None) -> tuple[int, Callable[[int], int]]:
    """FlashInfer's CUDA-graph query tile for p, and its count of KV chunks of so many pages (of the pages a
    sliding window reads): exact for a uniform batch or given lengths; otherwise a mixed batch's count is
    estimated from its mean and longest request (under it where the other requests all sit just past a
    chunk's end)."""
    g, b = p.group_size, p.batch_size
    tile = _fa2_cta_tile_q((b * p.q_len - b + 1) * g, p.head_dim)
    window = -(-(p.window_left + tile) // p.page_size) if p.window_left >= 0 else None

    def chunks(tokens: int, size: int) -> int:
        pages = -(-tokens // p.page_size)
        return -(-min(pages, window or pages) // size)

    def kv_chunks(size: int) -> int:
        if lens is not None:
            return sum(chunks(n, size) for n in lens)
        if b == 1 or p.max_kv_len == p.kv_len:
            return b * chunks(p.kv_len, size)
        if window is not None:
            return chunks(p.max_kv_len, size) + (b - 1) * chunks(p.kv_len, size)
        # the others' lengths unknown: their pages in chunks, half a chunk more each for the rounding
        rest = -(-(b * p.kv_len - p.max_kv_len) // p.page_size)
        return chunks(p.max_kv_len, size) + max(b - 1, math.ceil(rest / size + (b - 1) / 2))
    return tile, kv_chunks


def _fa2_cta_tile_q(packed_qo_len: int, head_dim: int) -> int:
    """FlashInfer's FA2DetermineCtaTileQ for head_dim below 512 on SM80 and newer."""
    if packed_qo_len > 64 and head_dim < 256:
        return 128
    return 64 if packed_qo_len > 16 else 16


def ineligible_kernels(registry: dict[str, KernelSpec], problem: AttentionProblem,
                       device: DeviceInfo) -> dict[str, list[str]]:
    """Each kernel of `registry` that cannot serve `problem` on `device`, with its reasons."""
    return {k: why for k, spec in registry.items() if (why := ineligibility_reasons(spec, problem, device))}


def combos_for(spec: KernelSpec, p: AttentionProblem) -> list[tuple[Combo, bool, bool]]:
    """The kernel's dtype combos that serve the problem, each with (q-quant?, separate out-quant?)."""
    out = []
    for c in spec.combos:
        if c.kv != p.kv_dtype:
            continue
        if c.q == p.q_dtype:
            q_quant = False
        elif c.q == "fp8" and spec.q_quant and p.q_dtype != "fp8":
            q_quant = True
        else:
            continue
        if c.out == p.out_dtype:
            out_quant = False
        elif p.out_dtype == "fp8" and c.out == p.q_dtype and spec.separate_out_quant:
            out_quant = True
        else:
            continue
        out.append((c, q_quant, out_quant))
    return out
