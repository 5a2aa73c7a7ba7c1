"""`tuner`: a thin shell over tuner.library and dispatcher, one module per group of commands.
Each command's docstring is its --help; the order of the imports below is the order --help lists."""
# isort: skip_file
from . import sweep, decide, analysis, data, serve  # noqa: F401 (each registers its commands on the app)
from .app import app, main

__all__ = ["app", "main"]
