"""The prototype: `tuner` with a decode batch size never measured (bracketed by measured rows) keeping the rule's
choice within $DECODE_KEEP times the usual keep margin, as prefill_between_keep does for prefill.
usage: DECODE_KEEP=4 python benchmarks/results/tried-keep-factors/decode_keep.py evaluate ARGS..."""
import os
import sys

import dispatcher.dispatch as dispatch

factor = float(os.environ.get("DECODE_KEEP", "1"))
shipped = dispatch.keep_factor


def keep_factor(model, p, rough):
    f = shipped(model, p, rough)
    if f == 1.0 and not rough and p.phase == "decode" and model.batch_rows(p) is not None:
        return factor
    return f


dispatch.keep_factor = keep_factor
from tuner.cli import main  # noqa: E402  (after the patch: the CLI's dispatchers call keep_factor through the module)

sys.argv = ["tuner", *sys.argv[1:]]
main()
