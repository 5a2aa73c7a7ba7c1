"""Reading a database back: held-out evaluation (evaluate.py), winner maps (report.py), heatmaps (plots.py)."""
