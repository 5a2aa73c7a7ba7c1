"""The attention problem: one frozen, validated, hashable value shared by Python, CLI and REST."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .balance import TOLERANCE, balance_of, bounds, canonical_balance, cell_balance, key_cell, mean_of, stored
from .cells import Q_TILE, longest_request, q_cell, q_tiles, size_cell, snap, snap_below

Phase = Literal["decode", "prefill"]
Dtype = Literal["bf16", "fp16", "fp8"]
PHASES: tuple[Phase, ...] = ("decode", "prefill")
DTYPES: tuple[Dtype, ...] = ("bf16", "fp16", "fp8")
# spellings users bring from torch / vLLM, normalised to ours
DTYPE_ALIASES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "auto": "bf16",
    "fp8_e4m3": "fp8", "e4m3": "fp8", "float8_e4m3fn": "fp8",
}


class ProblemError(ValueError):
    """An invalid problem; `field` names the offending field."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _dtype(field: str, value: Any) -> str:
    v = DTYPE_ALIASES.get(str(value).lower(), str(value).lower())
    if v not in DTYPES:
        raise ProblemError(field, f"{field} {value!r} is not supported; use one of {', '.join(DTYPES)}")
    return v


# The documented range of every integer field, inclusive: REST, the CLI and the store take the same.
LIMITS: dict[str, tuple[int, int]] = {
    "num_qo_heads": (1, 1024), "num_kv_heads": (1, 1024), "head_dim": (1, 1024), "page_size": (1, 4096),
    "batch_size": (1, 1 << 16), "kv_len": (1, 1 << 24), "max_kv_len": (1, 1 << 24), "q_len": (1, 1 << 20),
    "window_left": (-1, 1 << 24),
}


def _int(field: str, value: Any) -> int:
    lo, hi = LIMITS[field]
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            if isinstance(value, bool) or float(value) != int(value):
                raise ValueError
            value = int(value)
        except (TypeError, ValueError, OverflowError):
            raise ProblemError(field, f"{field} {value!r} is not an integer; give a whole number "
                                      f"{lo} <= {field} <= {hi}") from None
    n: int = value
    if not lo <= n <= hi:
        shown = n if abs(n) < 10**12 else f"{str(n)[:12]}..."
        raise ProblemError(field, f"{field} {shown} is out of range; use {lo} <= {field} <= {hi}")
    return n


def _ints(field: str, values: Sequence[Any]) -> tuple[int, ...]:
    """_int of each value; a batch's worth of plain ints in range is checked in C (from_seq_lens per step)."""
    lo, hi = LIMITS[field]
    t = tuple(values)
    if t and set(map(type, t)) == {int} and lo <= min(t) and max(t) <= hi:
        return t
    return tuple(_int(field, n) for n in t)


class _Derived(tuple):  # type: ignore[type-arg]
    """seq_lens that from_seq_lens checked and derived the sizes from: not checked again."""


def _flag(field: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "1", "yes"):
        return True
    if str(value).lower() in ("false", "0", "no"):
        return False
    raise ProblemError(field, f"{field} {value!r} is not a boolean; use true or false")


FIELDS: tuple[str, ...] = ()   # set below, once the dataclass exists


@dataclass(frozen=True, kw_only=True, eq=False)
class AttentionProblem:
    """One attention call as a serving engine issues it (per GPU, after tensor parallelism).

    A batch of requests: kv_len is the mean KV length per request (new tokens included), max_kv_len
    the longest (default: kv_len, every request alike); q_len is the new query tokens per request (1
    for decode). XQA's time follows the longest request, FA2's the total: neither length alone
    describes a mixed batch (from_seq_lens makes one from the requests' lengths).
    """

    phase: Phase
    num_qo_heads: int
    num_kv_heads: int
    head_dim: int = 128
    page_size: int = 16
    batch_size: int
    kv_len: int
    max_kv_len: int = 0                 # 0 (or None): kv_len, every request alike
    q_len: int = 0                      # 0 (or None): 1 for decode; a prefill must say
    q_dtype: str = ""                   # "" (or None): the model's, fp16 where kv or out is, else bf16
    kv_dtype: str = "bf16"
    out_dtype: str = "bf16"
    causal: bool = True
    window_left: int = -1
    has_sinks: bool = False
    kv_balance: float = 0.0             # 0: the canonical layout's (one long request, the others alike)
    # the requests' KV lengths, where a measurement must use these (not the canonical layout of the
    # batch's statistics); not part of the problem's identity, key or store columns
    seq_lens: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        def put(k: str, v: object) -> None:           # the dataclass is frozen
            object.__setattr__(self, k, v)
        if self.phase not in PHASES:                  # DECODE is decode, as FP8 is fp8
            if str(self.phase).strip().lower() not in PHASES:
                raise ProblemError("phase", f"phase {self.phase!r} is not supported; use one of {', '.join(PHASES)}")
            put("phase", str(self.phase).strip().lower())
        if self.max_kv_len in (0, None):
            put("max_kv_len", self.kv_len)
        if self.q_len is None or (type(self.q_len) is int and self.q_len == 0):   # one token per prefill: rarely meant
            if self.phase == "prefill":
                raise ProblemError("q_len", "q_len is required for prefill (the new tokens per request; 1 for one)")
            put("q_len", 1)
        for f in LIMITS:
            put(f, _int(f, getattr(self, f)))
        for f in ("kv_dtype", "out_dtype", "q_dtype"):
            if f == "q_dtype" and self.q_dtype in ("", None):     # an fp16 model's query is fp16, not bf16
                put(f, "fp16" if "fp16" in (self.kv_dtype, self.out_dtype) else "bf16")
            else:
                put(f, _dtype(f, getattr(self, f)))
        for f in ("causal", "has_sinks"):
            put(f, _flag(f, getattr(self, f)))
        if self.num_qo_heads % self.num_kv_heads:
            raise ProblemError("num_qo_heads", f"num_qo_heads {self.num_qo_heads} is not divisible by "
                               f"num_kv_heads {self.num_kv_heads}; GQA needs a whole number of query heads per KV head")
        if self.phase == "decode" and self.q_len != 1:
            raise ProblemError("q_len", f"q_len {self.q_len} is invalid for decode; decode has q_len 1 "
                               "(use phase 'prefill' for several new tokens per request)")
        if self.q_len > self.kv_len:
            raise ProblemError("q_len", f"q_len {self.q_len} exceeds kv_len {self.kv_len}; kv_len counts "
                               "the new tokens too, so kv_len >= q_len")
        longest = longest_request(self.batch_size, self.kv_len, self.q_len)
        if not self.kv_len <= self.max_kv_len <= longest:
            low = self.max_kv_len < self.kv_len       # e.g. dataclasses.replace(kv_len=) kept the old max
            hint = " (a uniform batch: leave max_kv_len out, or 0; in Python, with_sizes())" if low else ""
            raise ProblemError("max_kv_len", f"max_kv_len {self.max_kv_len} is out of range for batch_size "
                               f"{self.batch_size} x kv_len {self.kv_len}; the longest request holds from kv_len "
                               f"(the mean) to {longest} tokens (all but q_len per other request){hint}")
        put("kv_balance", self._checked_balance(self.kv_balance))
        if type(self.seq_lens) is _Derived:           # from_seq_lens derived the sizes from them: they agree
            put("seq_lens", tuple(self.seq_lens))
        elif self.seq_lens is not None:
            lens = _ints("kv_len", self.seq_lens)
            if len(lens) != self.batch_size or max(lens) != self.max_kv_len or min(lens) < self.q_len:
                raise ProblemError("seq_lens", f"seq_lens ({len(lens)} lengths, longest {max(lens, default=0)}) "
                                   f"do not describe batch_size {self.batch_size} with max_kv_len {self.max_kv_len}; "
                                   "give seq_lens alone (AttentionProblem.from_seq_lens)")
            self._check_layout(lens)
            put("seq_lens", lens)
        fields = tuple(getattr(self, f) for f in FIELDS)
        put("_fields", fields)
        put("_hash", hash(fields))

    def _check_layout(self, lens: tuple[int, ...]) -> None:
        """seq_lens must have the problem's mean and kv_balance (to a token, 1 / total), or another batch is keyed."""
        mean = mean_of(sum(lens), len(lens), max(lens), self.q_len)
        have = stored(balance_of(lens), *self.balance_range()) or self.balance_range()[1]
        if mean != self.kv_len or abs(have - self.balance) > max(2e-3, 1.0 / sum(lens)):
            what = (f"mean {sum(lens) / len(lens):.1f}" if mean != self.kv_len else f"kv_balance {have:.3f}")
            want = (f"kv_len {self.kv_len}" if mean != self.kv_len else
                    f"kv_balance {self.balance:.3f}" + ("" if self.kv_balance else " (0: the canonical layout's)"))
            raise ProblemError("seq_lens", f"seq_lens ({what}) do not describe {want}; give seq_lens alone "
                                           "(AttentionProblem.from_seq_lens)")

    def balance_range(self) -> tuple[float, float]:
        """The least and the most kv_balance a batch of these sizes can have (the most: canonical)."""
        return bounds(self.batch_size, self.kv_len, self.max_kv_len, self.q_len)

    def _checked_balance(self, value: Any) -> float:
        """kv_balance as held: 0.0 for the canonical layout, else within the batch's range (dispatcher/balance.py)."""
        try:
            if isinstance(value, bool):
                raise ValueError
            v = 0.0 if value is None else float(value)
        except (TypeError, ValueError):
            raise ProblemError("kv_balance", f"kv_balance {value!r} is not a number; give 0 < kv_balance <= 1 "
                                             "(0: one long request, the others alike)") from None
        if v == 0:
            return 0.0
        lo, hi = self.balance_range()
        if not lo - TOLERANCE <= v <= hi + TOLERANCE:
            # 0 stands for the default layout (one long request, the others alike), not for a balance of 0
            if self.max_kv_len <= self.kv_len:
                raise ProblemError("kv_balance", f"kv_balance {v:g} is out of range for a uniform batch (max_kv_len "
                                   f"{self.max_kv_len} = kv_len): its balance is 1; leave kv_balance out (or 0), or "
                                   "give max_kv_len, or seq_lens")
            sizes = f"batch_size {self.batch_size} x kv_len {self.kv_len} with max_kv_len {self.max_kv_len}"
            if hi - lo < 5e-4:                        # one layout only: "from 0.632 to 0.632" read as a typo
                raise ProblemError("kv_balance", f"kv_balance {v:g} is out of range: {sizes} allow one layout, "
                                   f"balance {hi:.3f}; leave kv_balance out (or 0), or give seq_lens alone")
            raise ProblemError("kv_balance", f"kv_balance {v:g} is out of range for {sizes}; it lies from {lo:.3f} "
                               f"(the longest requests' tokens in as few requests as possible) to {hi:.3f} (one long "
                               "request, the others alike: leave kv_balance out, or 0), or give seq_lens alone "
                               "(from_seq_lens)")
        return stored(v, lo, hi)

    @property
    def balance(self) -> float:
        """sum(min(length, mean)) / (batch x mean) of the requests (dispatcher/balance.py); kv_balance or,
        where that is 0, the canonical layout's."""
        return self.kv_balance or canonical_balance(self.batch_size, self.kv_len, self.max_kv_len)

    # computed once: the dispatcher's caches hash and compare problems on every call, often a new but
    # equal object each time (the dataclass's own __eq__ built two 14-tuples per comparison)
    def __hash__(self) -> int:
        h: int = self.__dict__["_hash"]
        return h

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AttentionProblem):
            return NotImplemented
        same: bool = other is self or self.__dict__["_fields"] == other.__dict__["_fields"]
        return same

    # -- derived ---------------------------------------------------------------
    @property
    def group_size(self) -> int:
        return self.num_qo_heads // self.num_kv_heads

    @property
    def num_tokens(self) -> int:
        return self.batch_size * self.q_len

    @property
    def skew(self) -> float:
        """The longest request over the mean (1.0: every request alike)."""
        return self.max_kv_len / self.kv_len

    @classmethod
    def from_seq_lens(cls, *, seq_lens: Sequence[int], **fields: Any) -> AttentionProblem:
        """The problem of a batch of requests with these KV lengths (new tokens included): batch_size
        is their count, kv_len their mean (rounded to the nearest token, up where the longest needs it:
        mean_of), max_kv_len the longest."""
        if not seq_lens:
            raise ProblemError("seq_lens", "seq_lens is empty; give each request's KV length")
        for f in sorted(set(fields) & {"batch_size", "kv_len", "max_kv_len", "kv_balance"}):
            raise ProblemError(f, f"{f} comes from seq_lens; leave it out")
        try:                              # named as the lengths: kv_len may not have been given at all
            lens = _ints("kv_len", seq_lens)
        except ProblemError as e:
            raise ProblemError("seq_lens", f"seq_lens: a request's {e}") from None
        q = _int("q_len", fields.get("q_len") or 1)        # a prefill without it: the problem says so below
        if min(lens) < q:     # checked first: the sizes' own range errors would hide which request it is
            raise ProblemError("seq_lens", f"request {lens.index(min(lens)) + 1} has {min(lens)} KV tokens, fewer "
                                           f"than q_len {q}: a request's KV length includes its new tokens")
        mean = mean_of(sum(lens), len(lens), max(lens), q)
        top = max(max(lens), mean)
        balance = stored(balance_of(lens), *bounds(len(lens), mean, top, q)) if top > mean else 0.0
        return cls(batch_size=len(lens), kv_len=mean, max_kv_len=top, kv_balance=balance, seq_lens=_Derived(lens),
                   **fields)

    def family(self) -> tuple[Any, ...]:
        """Everything but the sizes: problems of one family share kernels and are comparable."""
        return (self.phase, self.num_qo_heads, self.num_kv_heads, self.head_dim, self.page_size,
                self.q_dtype, self.kv_dtype, self.out_dtype, self.causal, self.window_left, self.has_sinks)

    def with_sizes(self, *, batch_size: int | None = None, q_len: int | None = None, kv_len: int | None = None,
                   max_kv_len: int | None = None) -> AttentionProblem:
        """This problem at other sizes. The longest request keeps its ratio to the mean unless given,
        as far as the new batch allows (a batch of one is uniform)."""
        b = batch_size or self.batch_size
        q = q_len or self.q_len
        kv = max(kv_len or self.kv_len, q)
        top = max_kv_len or round(kv * self.skew)
        top = max(kv, min(top, longest_request(b, kv, q)))
        balance = stored(self.kv_balance, *bounds(b, kv, top, q)) if self.kv_balance and top > kv else 0.0
        return dataclasses.replace(self, batch_size=b, q_len=q, kv_len=kv, max_kv_len=top, kv_balance=balance,
                                   seq_lens=None)

    def cell(self) -> AttentionProblem:
        """The problem that stands for this one's cell (see CELLS_PER_OCTAVE): the same batch size,
        q_len and kv_len at their cells' representative sizes, q_len within its own query tiles (Q_TILE),
        max_kv_len at the largest representative the batch allows at that mean. Power-of-two sizes are
        their own, and a representative is its own cell's."""
        q, kv, top = self._cell_sizes()
        balance = cell_balance(self.kv_balance, *bounds(self.batch_size, kv, top, q)) if top > kv else 0.0
        if (q, kv, top, balance) == (self.q_len, self.kv_len, self.max_kv_len, self.kv_balance):
            return self
        return dataclasses.replace(self, q_len=q, kv_len=kv, max_kv_len=top, kv_balance=balance, seq_lens=None)

    def _cell_sizes(self) -> tuple[int, int, int]:
        tiles = q_tiles(self.q_len)
        q = min(max(snap(self.q_len), (tiles - 1) * Q_TILE + 1), tiles * Q_TILE)
        kv = max(snap(self.kv_len), q)
        return q, kv, max(min(snap(self.max_kv_len), snap_below(longest_request(self.batch_size, kv, q))), kv)

    def cell_key(self) -> tuple[Any, ...]:
        """What identifies this problem's cell, without building its representative (cheap)."""
        key = (*self.family(), self.batch_size, *q_cell(self.q_len), size_cell(self.kv_len),
               size_cell(self.max_kv_len))
        if self.max_kv_len == self.kv_len:
            return key
        q, kv, top = self._cell_sizes()
        if top == kv:                               # its representative is a uniform batch
            return key
        return (*key, key_cell(self.kv_balance, *bounds(self.batch_size, kv, top, q)))

    def key(self) -> str:
        """A stable text key (the store's primary key for a problem); a uniform batch's has no max."""
        sizes = (self.batch_size, self.q_len, self.kv_len) + (() if self.max_kv_len == self.kv_len else
                                                               (self.max_kv_len,))
        balance = (f"b{self.kv_balance:.6f}",) if self.kv_balance else ()
        return "|".join(str(v) for v in (*self.family(), *sizes, *balance))

    def to_dict(self) -> dict[str, Any]:
        """The problem's fields (seq_lens only where set)."""
        out = {f: getattr(self, f) for f in FIELDS}
        if self.seq_lens is not None:
            out["seq_lens"] = list(self.seq_lens)
        return out

    def sizes(self) -> str:
        """Its sizes as fields, as decisions' reasons name them."""
        top = f" max_kv_len={self.max_kv_len}" if self.max_kv_len != self.kv_len else ""
        top += f" kv_balance={self.kv_balance:.3f}" if self.kv_balance else ""
        return f"batch_size={self.batch_size} q_len={self.q_len} kv_len={self.kv_len}{top}"

    def describe(self) -> str:
        """The problem in one short line, as it was asked (not its bucket)."""
        sizes = f"batch {self.batch_size} x kv {self.kv_len}"
        if self.max_kv_len != self.kv_len:
            sizes += f" (mean; longest {self.max_kv_len}" + (f", balance {self.kv_balance:.2f})" if self.kv_balance
                                                             else ")")
        if self.phase == "prefill":
            sizes += f" x q {self.q_len}"
        extra = "".join((" non-causal" if not self.causal else "", " sinks" if self.has_sinks else "",
                         f" window {self.window_left}" if self.window_left >= 0 else ""))
        return (f"{self.phase} {self.num_qo_heads}/{self.num_kv_heads} heads, head_dim {self.head_dim}, "
                f"page {self.page_size}, {sizes}, q/kv/out {self.q_dtype}/{self.kv_dtype}/{self.out_dtype}{extra}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttentionProblem:
        if not isinstance(data, Mapping):
            raise ProblemError("problem", f"a problem is an object of fields (phase, num_qo_heads, ...), "
                                          f"not {type(data).__name__} {str(data)[:40]!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ProblemError(unknown[0], f"unknown field {unknown[0]!r}; the fields are {', '.join(sorted(known))}")
        if data.get("seq_lens") is not None:
            rest = {k: v for k, v in data.items() if k != "seq_lens"}
            sized = ("batch_size", "kv_len", "max_kv_len", "kv_balance")
            made = cls.from_seq_lens(seq_lens=data["seq_lens"], **{k: v for k, v in rest.items() if k not in sized})
            for k in sized:
                given = rest.get(k)
                if k == "kv_balance" and given not in (None, 0):
                    given = dataclasses.replace(made, seq_lens=None, kv_balance=given).balance   # checked as given
                if given in (None, 0) or (k == "kv_balance" and abs(given - made.balance) <= 2e-3):
                    continue
                have = round(made.balance, 3) if k == "kv_balance" else getattr(made, k)
                if k == "kv_balance" or int(given) != have:
                    raise ProblemError(k, f"{k} {given} disagrees with seq_lens ({have}); give one or the other")
            return made
        missing = [f.name for f in dataclasses.fields(cls)
                   if f.default is dataclasses.MISSING and f.name not in data]
        if missing:
            raise ProblemError(missing[0], f"{missing[0]} is required")
        return cls(**data)


# the problem's identity: every field but seq_lens (which says how to lay out a measured batch)
FIELDS = tuple(f.name for f in dataclasses.fields(AttentionProblem) if f.name != "seq_lens")  # noqa: F811
# the defaults of the optional fields: the CLI's flags and the REST models take these
DEFAULTS = {f.name: f.default for f in dataclasses.fields(AttentionProblem)
            if f.default is not dataclasses.MISSING and f.name in FIELDS}
