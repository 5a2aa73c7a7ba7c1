"""Prototypes of the learned model's mixed-batch path, scored as `tuner evaluate --offgrid` scores (not
landed; see README.md). usage (repository root, after benchmarks/results/waves/score.sh has decompressed
the sets to /tmp/waves): python proto.py MODE DB SET[,SET...] where MODE is
  off          the code as it is;
  twin         a family with no mixed batch measured borrows the mixed residuals of its out-dtype twin
               (FP8 output's "X+out-quant" / "X+fused-out" read the BF16-output family's "X");
  gate:D       residuals only from measured mixed batches whose kv_balance is within D of the query's;
  feature:W    kv_balance as one more neighbour feature, W x (1 - kv_balance) (uniform batches: 0);
  regime       residuals only from measured mixed batches the prior reads by the same rule (waves of work
               on the same side of 1, unsplit_waves and longest_alone_waves);
  full:C       FA2's balanced plan with FP8 KV past unsplit_waves x (1 + C x min(1, (canonical balance -
               kv_balance) / 0.1)): random layouts cost 1.1-2.2x the prior there, the canonical one
               0.4-1.0x at 1.94 waves (canonical_full.txt);
  kind-regime  as regime, per pipeline by the boundaries its own prior rule has: a balanced plan 1 and
               unsplit_waves, a fixed split unsplit_waves, a kernel that follows the longest request
               longest_alone_waves;
  xqa-wave     XQA past longest_alone_waves as the mean batch + one wave at the longest (its longest
               request unsplit) in place of + the longest request alone (batch 1).
A set named h100-* is scored on the H100's times (--measured-on)."""
import math
import os
import sys
from dataclasses import replace

import dispatcher.predictor as P
from tuner.analysis.evaluate import evaluate_offgrid

H100 = "NVIDIA H100 80GB HBM3"
OUT_STAGE = ("+out-quant", "+fused-out")


def attention_part(pid: str) -> str:
    return next((pid[: -len(s)] for s in OUT_STAGE if pid.endswith(s)), pid)


def twin() -> None:
    init, predict = P.FittedModel.__init__, P.FittedModel.predict

    def new_init(self, *a, **k):
        init(self, *a, **k)
        self._twin_of = {}
        for fam in self.table.by_family if self._uniform is not None else ():
            for out in ("bf16", "fp8"):
                tw = fam[:7] + (out,) + fam[8:]
                if fam[0] == "decode" and fam not in self._mixed and tw in self._mixed:
                    self._twin_of[fam] = out

    def new_predict(self, p, stepped=True):
        out = self._twin_of.get(p.family())
        if out is None or p.skew == 1:
            return predict(self, p, stepped)
        near = self._mixed_near(replace(p, out_dtype=out))
        res = []
        for t in self._uniform.ragged_prior(p):
            used = self._residuals.used(attention_part(t.pipeline.id), near, self.config.mixed_residual_k)
            f = math.exp(sum(r for r, _ in used) / len(used)) if used else 1.0
            res.append(P.Timing(t.pipeline, t.median_us * f, t.spread_us * f, t.relerr))
        return res
    P.FittedModel.__init__, P.FittedModel.predict = new_init, new_predict


def gate(delta: float) -> None:
    near = P.FittedModel._mixed_near
    P.FittedModel._mixed_near = lambda self, p: [c for c in near(self, p) if abs(c.balance - p.balance) <= delta]


def regime() -> None:
    near = P.FittedModel._mixed_near

    def side(self, p):
        w = p.batch_size * p.num_kv_heads / self.sm_count
        return (w >= 1, w >= self.config.unsplit_waves, w >= self.config.longest_alone_waves)
    P.FittedModel._mixed_near = lambda self, p: [c for c in near(self, p) if side(self, c) == side(self, p)]


def full(c: float) -> None:
    src = open(P.__file__).read()
    old = "                t = _slower(m, top[pid]) if pid in top else m\n"
    assert old in src
    src = src.replace(old, old + "                if fp8:\n                    lo, hi = p.balance_range()\n"
                      f"                    t = _scaled(t, 1 + {c} * min(1.0, (hi - p.balance) / 0.1))\n")
    exec(compile(src, P.__file__, "exec"), P.__dict__)


def kind_regime() -> None:
    import dispatcher.mixed_residual as R
    used = R.Residuals.used

    def new_used(self, pid, nearest, k):
        model, p = self.query
        kind = next((t.pipeline for t in model._uniform.ragged_prior(p) if t.pipeline.id == pid), None)
        if kind is None:
            return used(self, pid, nearest, k)
        c = model.config
        bounds = ((c.unsplit_waves,) if P.fixed_split(kind) else (c.longest_alone_waves,)
                  if model.ragged.get(kind.kernel) == "longest" else (1.0, c.unsplit_waves))

        def side(q):
            w = q.batch_size * q.num_kv_heads / model.sm_count
            return tuple(w >= b for b in bounds)
        return used(self, pid, [q for q in nearest if side(q) == side(p)], k)
    R.Residuals.used = new_used
    predict = P.FittedModel.predict

    def new_predict(self, p, stepped=True):
        if getattr(self, "_residuals", None) is not None:
            self._residuals.query = (self, p)
        return predict(self, p, stepped)
    P.FittedModel.predict = new_predict


def feature(w: float) -> None:
    f = P.features
    P.features = lambda p, config, sm_count: (*f(p, config, sm_count), w * (1 - p.balance))


def xqa_wave() -> None:
    src = open(P.__file__).read()
    old = "alone = at(batch_size=1, kv_len=p.max_kv_len) if split_longest else {}"
    assert old in src
    src = src.replace(old, "alone = at(batch_size=wave, kv_len=p.max_kv_len, max_kv_len=p.max_kv_len) "
                           "if split_longest else {}")
    exec(compile(src, P.__file__, "exec"), P.__dict__)


def main() -> None:
    mode, db, sets = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    name, _, arg = mode.partition(":")
    {"off": lambda: None, "twin": twin, "gate": lambda: gate(float(arg)), "feature": lambda: feature(float(arg)),
     "xqa-wave": xqa_wave, "regime": regime, "kind-regime": kind_regime, "full": lambda: full(float(arg))}[name]()
    for s in sets:
        r = evaluate_offgrid(db, f"/tmp/waves/{s}.db", "NVIDIA H200", measured_on=H100 if s.startswith("h100") else None)
        o = r["overall"]["learned"]
        line, slow = [f"{mode:11s} {db.split('/')[-1]:14s} {s:13s} all {o['regret_geomean']:.4f}"], 0
        for k, v in r["configs"].items():
            m = v["learned"]
            slow += m["slower_than_vllm-2026"] if "kv=fp8" in k else 0
            if "kv=fp8" in k or os.environ.get("ALL"):     # ALL=1: the BF16-KV configurations too
                ok = m["regret_geomean"] <= 1.03 and m["regret_max"] <= 1.15
                line.append(f"{k.split()[1]}{'b' if 'kv=bf16' in k else ''}{'F' if 'out=fp8' in k else 'B'} {m['regret_geomean']:.3f}/"
                            f"{m['regret_max']:.2f}{'' if ok else '*'}")
        print("  ".join(line + [f"FP8 slower than vllm-2026 {slow}"]), flush=True)


if __name__ == "__main__":
    main()
