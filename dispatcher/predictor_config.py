"""The learned model's settings in one value (PredictorConfig), a JSON file for
`tuner evaluate --predictor-config`; dispatcher.predictor reads them."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PredictorConfig:
    """Every setting of the learned model. The uniform-batch defaults were picked on two H200 grids
    (2026-12-03c, -04b) and are reported on three others (benchmarks/results/predictor-2026-12-05/); the
    mixed-batch ones where their comments point (the last: benchmarks/results/mixed-std-scope/)."""
    k_nearest: int = 6            # measured points a local plane is fitted through
    ridge: float = 1e-3           # so that a size that does not vary (q_len in decode) costs nothing
    support_near: int = 3         # nearest measured shapes a pipeline must mostly have run at
    batch_step: float = 2.0       # decode: one octave of batch counts as this many octaves of KV
    split_weight: float = 1.0     # decode: log2(SMs / (batch x KV heads)) above 1, the kernels' split-KV room
    wave_weight: float = 1.0      # decode: log2(batch x KV heads / SMs) above 1, the waves of work
    twin_weight: float = 0.5      # weight of the page-size twin's ratio, where it agrees
    twin_agree: float = 0.1       # mean |log ratio difference| at the nearest shapes for it to agree
    twin_check: int = 6           # nearest measured shapes that check it
    kv_line_from: int = 8192      # the shorter bracketing KV length: below it launch costs bend the line
    kv_line_span: int = 8         # the longer one at most this many times the shorter
    between_rows: int = 0         # 1: a batch size never measured is read between the measured ones either side
    skew_weight: float = 1.0      # one octave of longest-over-mean counts as this many octaves of KV
    unsplit_waves: float = 1.9    # decode: batch x KV heads over SMs from which FA2's plan leaves requests unsplit
    planned_chunks: int = 1       # 1: decode, 16-bit KV, from unsplit_waves until FA2-TC's own plan can cut no
                                  # request, its longest costs a wave at the piece FlashInfer's plan cuts
                                  # (registry.planned_chunk), and a fixed split a wave of its chunks where that
                                  # piece is shorter (benchmarks/results/planned-chunks/)
    longest_alone_waves: float = 2.0   # decode: from here XQA's longest request costs as if run alone, after the rest
    fp8_longest_alone: int = 0    # 1: with FP8 KV too (0: one wave at the longest, if slower than the mean batch)
    fp8_fixed_chunks: int = 1     # 1: FP8 KV from unsplit_waves, a fixed split costs one wave of its chunks at least
    fp8_unbalanced: float = 2.0   # decode, FP8 KV, one wave to unsplit_waves: a balanced plan's mixed batch costs
                                  # the batch at the mean x (1 + slope x (canonical balance - kv_balance)), the
    unbalanced_wave_power: float = 1.6  # slope this at 1.5 waves, rising as ((waves - 1) / 0.5) ** this elsewhere
                                        # (benchmarks/results/waves/)
    split_rows: int = 1           # 1: kernels with a split_kv rule read an unmeasured decode batch by work per SM
    alone_k: int = 4              # >0: a uniform shape measured alone (a problem list, the daemon's misses:
                                  # Table.alone) is no input of the estimators, which read the family's grid; it
                                  # scales their times near it by its error there, at most this many nearest
    alone_radius: float = 1.0     # ... within this distance in feature space (log2 units), fading linearly
                                  # (picked on H100 off-grid folds, reported on H200 ones: benchmarks/results/alone/)
    ragged_keep: float = 4.0      # a mixed batch read from uniform ones (rough estimates): the rule's choice
                                  # stands within this many times its usual keep margin (table.keep_margin_us)
    prefill_between_keep: float = 12.0  # so does a prefill batch size never measured, read between measured rows
                                        # (0: off; picked on H100 prefill-wave seeds 1, 2, 4, reported on 3 and 5
                                        # and the off-grid seeds: benchmarks/results/prefill-keep/)
    mixed_residual_k: int = 4     # >0: a mixed batch of a family with mixed batches measured is the ragged prior
                                  # scaled by its error at this many nearest of them (dispatcher/mixed_residual.py)
    mixed_residual_std: float = 1.0  # ... by exp(mean + this x standard deviation) of those log errors: where the
                                     # nearest disagree on the prior's error, the pipeline reads slower
    mixed_residual_std_waves: float = 1.0  # ... from this many waves of CTAs (batch x KV heads / SMs; any, where
                                           # the SM count is unknown) on only,
    mixed_residual_std_scope: int = 2      # ... and for 0: every pipeline, 1: all but per-request kernels (XQA),
                                           # 2: balanced plans only (FA2-TC's and FA3's own), not a fixed split
                                           # either: their priors fit (0 and 0: the rule before;
                                           # benchmarks/results/mixed-std-scope/)
    mixed_residual_16bit_kv: int = 0  # 1: so do a BF16 or FP16 KV family's measured mixed batches (0: the model
                                      # leaves them out where the family has uniform ones to read them from:
                                      # benchmarks/results/bf16-mixed-corrections/)
    tile_weight: float = 8.0      # prefill: log2(query rows padded to whole 128-row tiles / query rows) x this
    resident_step: float = 0.4    # decode, "resident" split rules: twice the busiest SM's load costs 1 + this
    dominated_floor: float = 1.0  # uniform decode: at least this x the pipeline's slowest time at a measured batch
                                  # it dominates (0: no floor; benchmarks/results/dominated-floor/)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PredictorConfig:
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"predictor setting {unknown[0]!r} is unknown; the settings are {', '.join(known)}")
        defaults = cls()
        for k, v in data.items():
            want = type(getattr(defaults, k))
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (want is int and not float(v).is_integer()):
                raise ValueError(f"predictor setting {k}={v!r} is not a{'n integer' if want is int else ' number'}")
            if not math.isfinite(v) or v < 0:
                why = "is negative" if v < 0 else "is not a finite number"
                raise ValueError(f"predictor setting {k}={v!r} {why}; every setting is 0 or more "
                                 f"(the default: {getattr(defaults, k)!r})")
            least, why_least = AT_LEAST.get(k, (0, ""))
            if v < least:
                raise ValueError(f"predictor setting {k}={v!r} is under {least}: {why_least} "
                                 f"(the default: {getattr(defaults, k)!r})")
            most, why_most = AT_MOST.get(k, (math.inf, ""))
            if v > most:
                raise ValueError(f"predictor setting {k}={v!r} is over {most}: {why_most} "
                                 f"(the default: {getattr(defaults, k)!r})")
        values: dict[str, Any] = {k: want_cast(getattr(defaults, k), v) for k, v in data.items()}
        return replace(defaults, **values)

    @classmethod
    def from_file(cls, path: str | Path) -> PredictorConfig:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as e:
            raise ValueError(f"predictor config {str(path)!r} cannot be read ({e.strerror})") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"predictor config {str(path)!r} is not JSON ({e.msg})") from None
        if not isinstance(data, dict):
            raise ValueError(f"predictor config {str(path)!r} is not a JSON object of settings")
        return cls.from_dict(data)


AT_LEAST = {"k_nearest": (1, "a plane needs at least one measured point")}     # setting: (least, why)
AT_MOST = {"mixed_residual_std_scope": (2, "0 is every pipeline, 1 all but per-request kernels, 2 balanced plans "
                                           "only"),
           "dominated_floor": (1, "a batch that does more work than a measured one is not faster than it")}


def want_cast(default: object, value: float) -> int | float:
    return int(value) if isinstance(default, int) else float(value)
