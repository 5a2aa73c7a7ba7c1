"""The 1.5-wave FP8 batches on the H100, one-long layout against spread (same batch size, mean and longest):
per KV heads and skew, FA2-TC's default plan and XQA each over its own time in the uniform batch at the mean
(measured in the same run: the one-long set holds the uniform batches), and which kernel family won.
usage (repository root): python benchmarks/results/waves/h100/layouts.py > benchmarks/results/waves/h100/layouts.txt"""
import lzma
import math
import sqlite3
import statistics
import tempfile

HERE = "benchmarks/results/waves/h100"


def load(name: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".db") as f:
        f.write(lzma.open(f"{HERE}/{name}.db.xz").read())
        f.flush()
        out: dict = {}
        for kvh, od, b, kv, top, pid, us in sqlite3.connect(f.name).execute(
                "select num_kv_heads, out_dtype, batch_size, kv_len, max_kv_len, pipeline, median_us "
                "from measurements where status = 'ok'"):
            out.setdefault((kvh, od, b, kv, top), {})[pid] = us
        return out


def fastest(t: dict, prefix: str) -> float | None:
    return min((v for k, v in t.items() if k.startswith(prefix)), default=None)


def gm(v: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in v))


one, spread = load("one-long"), load("spread")
for name, sets in (("one-long", one), ("spread", spread)):
    print(f"== {name}")
    for kvh in (2, 8):
        for skew in (2, 4, 8, 16, 32):
            fa2, xqa, won, batch = [], [], [], set()
            for (h, od, b, kv, top), t in sets.items():
                uniform = one.get((h, od, b, kv, kv))
                if h != kvh or top != kv * skew or not uniform:
                    continue
                fa2.append(fastest(t, "fa2-tc[fixed_split_size=0]") / fastest(uniform, "fa2-tc[fixed_split_size=0]"))
                xqa.append(fastest(t, "trtllm-xqa") / fastest(uniform, "trtllm-xqa"))
                w = min(t, key=t.get)
                batch.add(b)
                won.append("FA2-TC split 1024" if "fixed_split_size=1024" in w else
                           "FA2-TC default" if w.startswith("fa2-tc") else w.split("[")[0])
            if fa2:
                print(f"  {kvh} KV heads (batch {', '.join(map(str, sorted(batch)))}), skew {skew:2d}: {len(fa2):2d} batches; FA2-TC default plan / "
                      f"uniform at the mean gm {gm(fa2):.2f} ({min(fa2):.2f}-{max(fa2):.2f}), XQA {gm(xqa):.2f}; "
                      f"fastest: {', '.join(f'{k} {won.count(k)}' for k in sorted(set(won)))}")
