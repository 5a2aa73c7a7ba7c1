"""How far FlashInfer's CUDA-graph plan chunk for FA2-TC (scheduler.cuh, PrefillBinarySearchKVChunkSize: the least
KV chunk in pages whose chunks fit 2 x SMs / KV heads) for a measured batch's own lengths is from the chunk for the
canonical one-long layout with the same batch size, mean and longest request (all the dispatcher knows); and that
ratio where FA2-TC's default plan measured > 1.15x the best FP8-KV pipeline.
With DB=EVAL.json (`tuner evaluate --offgrid DB --json` of the shipped db), also the chunk ratio of every FP8-KV
batch over 1.15 where the learned choice was FA2-TC's default plan.
usage (repository root; mixed seeds 1-3 decompressed by ../h200-2026-12-05-mixedsweep/score.sh, seed 4 by
`xz -dc benchmarks/results/prefill-tiles/mixed4.db.xz > /tmp/prefill-tiles/mixed4.db`):
python benchmarks/results/tried-2026-12-05/plan_layout.py /tmp/h200-2026-12-05-mixedsweep/mixed1.db=/tmp/m1.json ..."""
import json
import sqlite3
import sys

SMS = 132


def chunk(lens, page, kvh):
    pages = [max(1, -(-n // page)) for n in lens]
    most = 2 * SMS // kvh
    lo, hi = max(128 // page, 1), max(pages)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if sum(-(-q // mid) for q in pages) > most else (lo, mid)
    return lo


def one_long(b, mean, top):
    if b == 1:
        return [top]
    base, extra = divmod(b * mean - top, b - 1)
    return [top] + [base + 1] * extra + [base] * (b - 1 - extra)


for arg in sys.argv[1:]:
    path, _, ev = arg.partition("=")
    c = sqlite3.connect(path)
    ratios, slow, of = [], [], {}
    for key, b, h, m, x, page, kd, lens in c.execute(
            "select problem_key, batch_size, num_kv_heads, kv_len, max_kv_len, page_size, kv_dtype, max(lengths) "
            "from measurements where phase = 'decode' and lengths is not null and max_kv_len > kv_len "
            "group by problem_key"):
        r = chunk(json.loads(lens), page, h) / chunk(one_long(b, m, x), page, h)
        ratios.append(r)
        of[(kd, h, b, m, x)] = r
        t = dict(c.execute("select pipeline, median_us from measurements where problem_key = ? and status = 'ok'",
                           (key,)).fetchall())
        default = min((us for p, us in t.items() if p.startswith("fa2-tc[fixed_split_size=0]")), default=None)
        if kd == "fp8" and default and default > 1.15 * min(t.values()):
            slow.append(f"{b}x{m} (longest {x}, {h} KV heads): {default / min(t.values()):.2f}x, chunk ratio {r:.2f}")
    ratios.sort()
    print(f"{path.split('/')[-1]}: {len(ratios)} batches; measured/canonical chunk median {ratios[len(ratios) // 2]:.2f}, "
          f"p90 {ratios[int(0.9 * len(ratios))]:.2f}, max {ratios[-1]:.2f}; over 1.5x in {sum(v > 1.5 for v in ratios)}")
    print(f"  FP8 KV, FA2-TC default plan > 1.15x the best: {len(slow)}; chunk ratio >= 1.4 in "
          f"{sum(float(s.rsplit(' ', 1)[1]) >= 1.4 for s in slow)}")
    if ev:
        for cfg, v in json.load(open(ev))["configs"].items():
            for w in v["learned"]["worst"]:
                if "kv=fp8" in cfg and w["regret"] > 1.15 and w["chose"].startswith("fa2-tc[fixed_split_size=0]"):
                    size = dict(f.split("=") for f in w["shape"].split())
                    h = int(cfg.split()[1].split("/")[1])
                    r = of[("fp8", h, int(size["batch"]), int(size["kv_len"]), int(size["max_kv_len"]))]
                    print(f"  learned chose FA2-TC's default plan, regret {w['regret']:.2f}: {cfg} {w['shape']}: "
                          f"chunk ratio {r:.2f}")
