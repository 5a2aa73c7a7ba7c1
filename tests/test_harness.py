"""The interleaved timing loop on real (sleeping) calls with the CPU wall-clock timer."""
import time

from tuner.harness import TimingConfig, WallTimer, time_interleaved


def sleeper(seconds: float, calls: list):
    def f():
        calls.append(1)
        time.sleep(seconds)
    return f


CFG = TimingConfig(rounds=5, warmup=1, round_s=0.0005, max_calls=3, keep_rounds=1, far_behind=2.5)   # wide: sleep jitters


def test_a_far_slower_candidate_stops_after_the_first_round_and_the_ranking_holds():
    calls = {"fast": [], "close": [], "slow": []}
    fns = {"fast": [sleeper(0.001, calls["fast"])], "close": [sleeper(0.0012, calls["close"])],
           "slow": [sleeper(0.004, calls["slow"])]}
    stats = time_interleaved(fns, WallTimer(CFG))
    # the two close candidates are timed in every round, the one 4x behind in one round only
    assert stats["fast"].reps == 5 and stats["close"].reps == 5   # one call per round: each is over round_s
    assert stats["slow"].reps == 1
    assert stats["fast"].median_us < stats["close"].median_us < stats["slow"].median_us
    assert stats["slow"].median_us > 3000


def test_first_warm_skips_only_the_first_copys_warm_up_call():
    warm, cold = [], []
    WallTimer(CFG).prepare([sleeper(0, warm), sleeper(0, cold)], first_warm=True)
    # copy 0 is called once to size the round (not warmed again), copy 1 is warmed
    assert len(warm) == 1 and len(cold) == 1
    again = []
    WallTimer(CFG).prepare([sleeper(0, again)])
    assert len(again) == 2                      # warm-up and the sizing call
