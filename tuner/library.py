"""What the CLI and the REST routes call: the operations, with no I/O format of their own."""
from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dispatcher.device import DeviceInfo, describe
from dispatcher.policy import checked_budget
from dispatcher.problem import DTYPE_ALIASES, DTYPES, PHASES, AttentionProblem
from dispatcher.registry import KernelSpec, load_registry
from dispatcher.resolve import default_timing_mode
from dispatcher.schema import StoreError
from dispatcher.store import default_path, environments, open_readonly

from .grid import DENSE, FULL, MIXED, QUICK, problems
from .models import preset
from .options import SweepOptions
from .store import Store, is_shipped
from .timing import make_timer

if TYPE_CHECKING:               # tuner.sweep imports torch: `tuner decide` and `tuner show` never need it
    from .sweep import SweepReport

GRIDS = {"quick": QUICK, "full": FULL, "dense": DENSE, "mixed": MIXED}


def sweep_page_sizes() -> tuple[int, ...]:
    """The page sizes a grid may use: those some kernel declares (the TRT-LLM kernels take powers of
    two from 16); a kernel that takes any page size declares none."""
    return tuple(sorted({n for s in load_registry().values() for n in (s.page_sizes or ())}))


def _spelled(values: tuple, aliases: dict[str, str] | None = None) -> tuple:
    """Values spelled as a problem's fields may be (DECODE, FP8, bfloat16), as the names they stand for."""
    return tuple((aliases or {}).get(str(v).lower(), str(v).lower()) for v in values)


def _one_of(name: str, values: tuple, allowed: tuple) -> None:
    if not values:
        raise ValueError(f"{name} is empty; give at least one of {', '.join(map(str, allowed))}")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(f"{name} {bad[0]!r} is not supported; use {', '.join(map(str, allowed))}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} lists {values!r} with repeats; name each once")


@dataclass(frozen=True)
class SweepRequest:
    """A preset sweep's options, validated on creation (the CLI and POST /v1/sweeps both build one)."""
    model: str = "llama4-scout"
    tps: tuple[int, ...] | None = None
    phases: tuple[str, ...] = ("decode", "prefill")
    kv_dtypes: tuple[str, ...] = ("bf16", "fp8")
    out_dtypes: tuple[str, ...] = ("bf16", "fp8")
    page_sizes: tuple[int, ...] | None = None
    grid: str | None = None        # "quick" | "full" | "dense" | "mixed"; None: full on a GPU, quick on the CPU
    device: str = "auto"
    timing: str | None = None      # None: graph on CUDA, wall on the CPU
    tiles: bool = False            # also the sizes where kernels change pace with the GPU (tuner/tiles.py)

    def __post_init__(self) -> None:
        with _field("model"):
            m = preset(self.model)
        with _field("tp"):
            for tp in self.tps or ():
                if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
                    raise ValueError(f"tp {tp!r} is not a tensor-parallel size; give a whole number >= 1")
                m.heads(tp)                                   # says which sizes divide the model's heads
            if self.tps is not None:
                _one_of("tp", self.tps, tuple(sorted(set(self.tps))))
        object.__setattr__(self, "phases", _spelled(self.phases))
        object.__setattr__(self, "kv_dtypes", _spelled(self.kv_dtypes, DTYPE_ALIASES))
        object.__setattr__(self, "out_dtypes", _spelled(self.out_dtypes, DTYPE_ALIASES))
        with _field("phases"):
            _one_of("phase", self.phases, PHASES)
        with _field("kv_dtypes"):
            _one_of("kv dtype", self.kv_dtypes, DTYPES)
        with _field("out_dtypes"):
            _one_of("out dtype", self.out_dtypes, DTYPES)
        if self.page_sizes is not None:
            with _field("page_sizes"):
                _one_of("page size", self.page_sizes, sweep_page_sizes())
        if self.grid is not None and self.grid not in GRIDS:
            raise SweepRequestError("grid", f"grid {self.grid!r} is not one of {', '.join(GRIDS)}")
        if self.grid == "mixed":
            self._check_mixed()

    def _check_mixed(self) -> None:
        """The mixed grid differs from the full one only in FP8-KV decode: refuse a request without it."""
        skewed = GRIDS["mixed"].skew_kv_dtypes
        if "decode" not in self.phases:
            field, got = "phases", f"the phases asked are {','.join(self.phases)}"
        elif not set(self.kv_dtypes) & set(skewed):
            field, got = "kv_dtypes", f"the KV dtypes asked are {','.join(self.kv_dtypes)}"
        else:
            return
        raise SweepRequestError(field, f"the mixed grid adds a skew axis to {'/'.join(skewed)}-KV decode only (other "
                                "caches' mixed batches are read from uniform ones: docs/mixed-batches.md), and "
                                f"{got}: ask for decode and fp8, or sweep the full grid")


class SweepRequestError(ValueError):
    """An invalid sweep option; `field` names it as SweepRequest (and POST /v1/sweeps) does."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@contextmanager
def _field(name: str) -> Iterator[None]:
    """A ValueError raised within names the option `name`."""
    try:
        yield
    except SweepRequestError:
        raise
    except ValueError as e:
        raise SweepRequestError(name, str(e)) from None


def sweep_problems(req: SweepRequest, dev: DeviceInfo) -> list[AttentionProblem]:
    m = preset(req.model)
    on_cpu = dev.kind == "cpu"
    grid = GRIDS[req.grid or ("quick" if on_cpu else "full")]
    tps = list(req.tps or ((1,) if on_cpu else m.default_tps))
    pages = list(req.page_sizes or ((16,) if on_cpu else (16, 32)))
    # one layer's cache may take its share of 3/4 of the GPU (the rest: weights, activations)
    cap = None if on_cpu else int(0.75 * dev.memory_bytes / m.num_layers)
    if req.tiles and not dev.sm_count:
        raise SweepRequestError("tiles", f"the tile sizes are placed by the GPU's SM count (waves of work), and "
                                f"{dev.name} has none: sweep a CUDA device, or leave out tiles")
    return problems(m, tps, list(req.phases), list(req.kv_dtypes), list(req.out_dtypes), pages, grid,
                    max_kv_bytes=cap, tiles_sms=dev.sm_count if req.tiles else 0)


def fleet_problems(req: SweepRequest, devs: list[DeviceInfo]) -> list[AttentionProblem]:
    """One problem list for devices that share a queue (--devices): the first device's grid, and tiles only
    where every device has its SM count (they are placed by it)."""
    from .isolation import label
    by_count: dict[int, list[DeviceInfo]] = {}
    for d in devs:
        by_count.setdefault(d.sm_count, []).append(d)
    if req.tiles and len(by_count) > 1:
        groups = "; ".join(f"{', '.join(label(d) for d in ds)} {'have' if len(ds) > 1 else 'has'} {n} SMs"
                           for n, ds in by_count.items())
        runs = " and ".join("--devices " + ",".join(str(d.index) if d.kind == "cuda" else "cpu" for d in ds)
                            for ds in by_count.values())
        raise SweepRequestError("tiles", f"the tile sizes are placed by the GPU's SM count, and {groups}: sweep "
                                f"them apart ({runs}), or leave out tiles")
    return sweep_problems(req, devs[0])


def check_sweep(dev: DeviceInfo, mode: str, opts: SweepOptions) -> None:
    """ValueError for a sweep that could only fail once started: before it creates or touches the database."""
    if dev.kind == "cpu" and mode != "wall":
        raise ValueError(f"timing mode {mode!r} needs a CUDA device; the CPU is timed in 'wall' mode")
    if opts.max_relerr is not None:
        checked_budget(opts.max_relerr, "--max-relerr")


def start_sweep(req: SweepRequest, db=None, opts: SweepOptions = SweepOptions(), on_problem=None,
                allow_shipped: bool = True, say=print, search: str = "grid", budget: float = 1 / 3) -> SweepReport:
    dev = describe(req.device)
    mode = req.timing or default_timing_mode(dev)
    probs = sweep_problems(req, dev)
    if not allow_shipped and is_shipped(default_path(db)):
        raise StoreError("refusing to write the shipped heuristics.db here; pass another --db")
    return run_problems(probs, dev, db, mode, opts, on_problem, say, search, budget)


def prebuild_for(probs: list[AttentionProblem], dev: DeviceInfo, registry: dict[str, KernelSpec],
                 opts: SweepOptions, say: Callable[[str], None]) -> float:
    """Compile, up front and in parallel, every JIT module the sweep of `probs` needs (CUDA only);
    the seconds it took."""
    if dev.kind != "cuda":
        return 0.0
    from .runners.jit import prebuild
    from .sweep import plan
    return float(prebuild(plan(probs, dev, registry, opts.all_tactics), dev, say)["seconds"])


def run_problems(probs: list[AttentionProblem], dev: DeviceInfo, db, mode: str, opts: SweepOptions = SweepOptions(),
                 on_problem=None, say=print, search: str = "grid", budget: float = 1 / 3) -> SweepReport:
    """JIT prebuild (CUDA), then the sweep; what `tuner sweep` and the daemon's jobs both run."""
    from .sweep import run_sweep
    check_sweep(dev, mode, opts)
    store = Store(db)
    try:
        registry = load_registry()
        if search not in ("grid", "adaptive"):
            raise ValueError(f"search {search!r} is not grid or adaptive")
        jit_s = prebuild_for(probs, dev, registry, opts, say)
        timer = make_timer(mode)
        if search == "adaptive":
            report = _adaptive(probs, dev, store, db, timer, opts, registry, on_problem, budget, say)
        else:
            report = run_sweep(probs, dev, store, timer, opts, registry, on_problem)
        if jit_s:
            report.seconds["jit"] += jit_s
        return report
    finally:
        store.close()


def run_on_devices(probs: list[AttentionProblem], devices: list[DeviceInfo], db, mode: str,
                   opts: SweepOptions = SweepOptions(), on_problem=None, say=print, on_plan=None) -> SweepReport:
    """`tuner sweep --devices`: JIT prebuild once (the modules are shared), then tuner/fleet.py."""
    from .fleet import sweep_devices
    check_sweep(devices[0], mode, opts)
    store = Store(db)
    try:
        registry = load_registry()
        jit_s = prebuild_for(probs, devices[0], registry, opts, say)
        report = sweep_devices(probs, devices, store, mode, opts, registry, on_problem, say, on_plan)
        if jit_s:
            report.seconds["jit"] += jit_s
        return report
    finally:
        store.close()


def _adaptive(probs, dev, store, db, timer, opts, registry, on_problem, budget, say) -> SweepReport:
    """tuner/adaptive.py over this grid, each chosen batch swept into the store like a grid sweep,
    all in one worker (starting one per batch cost the H200 run 173 of its 268 s)."""
    from dispatcher.measurements import read_table
    from dispatcher.predictor import Predictor

    from .search.adaptive import adaptive_sweep
    from .search.screen import screened_fits
    from .sweep import SweepReport, isolated, note_retries, run_sweep
    report = SweepReport(store.environment(dev, timer.mode))
    measurer = isolated(dev, timer.mode, opts) if opts.isolate else None
    fit, screen = screened_fits(lambda t: Predictor().fit(t, dev, remember=True), opts.screen, dev, registry,
                                store.screened(report.env_id))

    def measure(ps):   # adaptive_sweep asks stopped() after each batch, so none follows a stop
        part = run_sweep(ps, dev, store, timer, opts, registry, on_problem, measurer, screen)
        report.outcomes += part.outcomes
        report.seconds.update(part.seconds)
        report.stopped_early = part.stopped_early
    try:
        adaptive_sweep(probs, measure, lambda: read_table(db, dev, timer.mode), budget, say,
                       fit=fit, between=True, stopped=lambda: report.stopped_early)
    finally:
        note_retries(report, getattr(measurer, "fresh_retries", 0))
        if report.count("screened"):
            report.notes.append(f"{report.count('screened')} pipelines not measured: at least {opts.screen:g}x "
                                "the fastest at the 4 nearest measured (or screened) shapes (stored as screened; "
                                "--screen 0 measures them)")
        if measurer is not None:
            measurer.close()
    return report


def adaptive_total(probs: list[AttentionProblem], budget: float) -> int:
    """How many problems an adaptive search of `probs` measures (for a progress bar): its budget as
    search.adaptive.allocate shares it between the families."""
    import math

    from .search.adaptive import allocate
    fams = Counter(p.family() for p in probs)
    return sum(allocate(dict(fams), math.ceil(budget * len(probs))).values())


def overview(db=None) -> dict:
    """Environments, counts and coverage of a database (tuner show, GET /v1/environments)."""
    conn = open_readonly(db)
    if conn is None:
        return {"db": str(default_path(db)), "environments": [], "measurements": 0, "winners": 0}
    try:
        envs = environments(conn)
        q = lambda sql, *a: conn.execute(sql, a).fetchall()  # noqa: E731
        by_env = defaultdict(dict)
        for env_id, status, n in q("select env_id, status, count(*) from measurements group by env_id, status"):
            by_env[env_id][status] = n
        columns = {r[1] for r in q("pragma table_info(measurements)")}
        alone = dict(q("select env_id, count(distinct problem_key) from measurements where alone = 1 group by env_id")
                     if "alone" in columns else [])    # schema 6
        mixed = dict(q("select env_id, count(distinct problem_key) from measurements where max_kv_len > kv_len "
                       "and status = 'ok' group by env_id") if "max_kv_len" in columns else [])
        for e in envs:
            e["measurements"] = by_env.get(e["id"], {})
            e["mixed_batches"] = mixed.get(e["id"], 0)
            e["shapes_measured_alone"] = alone.get(e["id"], 0)
            e["winners"] = q("select count(*) from winners where env_id = ?", e["id"])[0][0]
            e["coverage"] = [dict(r) for r in q(
                "select phase, num_qo_heads, num_kv_heads, page_size, kv_dtype, out_dtype, count(*) as buckets, "
                "min(batch_size) as min_batch, max(batch_size) as max_batch, min(kv_len) as min_kv, "
                "max(kv_len) as max_kv from winners where env_id = ? group by phase, num_qo_heads, "
                "num_kv_heads, page_size, kv_dtype, out_dtype", e["id"])]
        return {"db": str(default_path(db)), "environments": envs,
                "measurements": q("select count(*) from measurements")[0][0],
                "winners": q("select count(*) from winners")[0][0]}
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{default_path(db)} cannot be read ({e})") from None
    finally:
        conn.close()


def winner_summary(report: SweepReport) -> list[dict]:
    """Per phase, heads and dtype configuration: how often each pipeline won."""
    groups: dict[tuple, Counter] = defaultdict(Counter)
    for o in report.outcomes:
        if o.winner:
            p = o.problem
            groups[(p.phase, f"{p.num_qo_heads}/{p.num_kv_heads}", p.page_size, p.kv_dtype, p.out_dtype)][o.winner] += 1
    return [{"phase": k[0], "heads": k[1], "page_size": k[2], "kv_dtype": k[3], "out_dtype": k[4],
             "winners": dict(c.most_common())} for k, c in sorted(groups.items())]
