"""The `tuner` application: the typer app, what every command shares, and main()."""
from __future__ import annotations

import errno
import os
import sqlite3
import sys
from collections.abc import Callable
from functools import wraps
from typing import Annotated, Any, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from dispatcher import Dispatcher, ProblemError, StoreError, load
from dispatcher.dispatch import rule_only
from dispatcher.registry import RegistryError
from dispatcher.store import default_path

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Switchyard: measure attention kernels on this host and choose the fastest per problem.")
# piped or redirected, rich assumes 80 columns and cuts evaluate's table cells to "1.13…": write such output wide
out = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 200)
err = Console(stderr=True)

Db = Annotated[Optional[str], typer.Option("--db", help="SQLite store (default: $SWITCHYARD_DB or ./heuristics.db)")]
DecideDb = Annotated[Optional[str], typer.Option("--db", help="SQLite store (default: $SWITCHYARD_DB or "
                                                              "./heuristics.db); "
                                                             "none: decide by the built-in rule alone")]
Dev = Annotated[Optional[str], typer.Option("--device", help="auto | cpu | cuda[:N] | a device name in the database")]
AnalysedDev = Annotated[Optional[str], typer.Option("--device", help="a device name in the database, or auto | cpu | "
                                                                      "cuda[:N] (default: the one it recorded last)")]
LocalDev = Annotated[Optional[str], typer.Option("--device", help="the device to measure on: auto | cpu | cuda[:N]")]


F = TypeVar("F", bound=Callable[..., Any])


def friendly(fn: F) -> F:
    """Library errors become one readable line and exit code 2, never a traceback."""
    @wraps(fn)
    def run(*a, **k):
        try:
            return fn(*a, **k)
        except BrokenPipeError:                 # `tuner show --json | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit
            raise typer.Exit(1) from None
        except (ProblemError, StoreError, RegistryError, ValueError, LookupError, OSError) as e:
            text = os_advice(e) if isinstance(e, OSError) else str(e)
            from ..library import SweepRequestError
            if isinstance(e, SweepRequestError) and (flag := "--" + e.field.replace("_", "-")) not in text:
                text += f" ({flag})"          # a sweep option, named as REST names it: the flag that set it
            err.print(f"[red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except sqlite3.Error as e:
            err.print(f"[red]error:[/] {escape(sqlite_advice(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
    return run  # type: ignore[return-value]


def os_advice(e: OSError) -> str:
    """A file error as the path, what is wrong with it and what to do (not a bare "[Errno 21]")."""
    if e.filename is None or e.strerror is None:
        return str(e)
    fix = {errno.EISDIR: "it is a folder; name a file", errno.ENOENT: "no such file or folder; check the path "
           "(a file written needs its folder to exist)", errno.EACCES: "not permitted for this user; name a path "
           "you can use", errno.ENOTDIR: "a part of the path is a file, not a folder",
           errno.ENOSPC: "the disk is full"}.get(e.errno or 0, e.strerror)
    both = f"{e.filename} -> {e.filename2}" if e.filename2 is not None else f"{e.filename}"
    return f"{both}: {fix}"


def sqlite_advice(e: sqlite3.Error) -> str:
    """An SQLite error as what to do about it (rows already written stay: each problem is one transaction)."""
    text = str(e)
    if "locked" in text:
        return (f"the database is {text.split('database is ')[-1]}: another process (a sweep or `tuner serve`'s "
                "job) is writing it; rerun when it is done, or pass another --db")
    if "readonly" in text:
        return f"{text}: the file or its folder is not writable by this user; pass a writable --db"
    return f"SQLite: {text}"


def require_db(db: str | None) -> None:
    """A read command on a database that does not exist is a mistake (a mistyped --db), not an empty answer."""
    path = default_path(db)
    if not path.exists():
        raise ValueError(f"{path}: no such database; run `tuner sweep` to make one, or point --db "
                         "(or $SWITCHYARD_DB) at a heuristics.db")


def no_db(db: str | None) -> bool:
    """--db none (or $SWITCHYARD_DB=none): no database, the built-in rule alone."""
    return default_path(db).name.strip().lower() == "none"


def written_db(db: str | None, command: str) -> str | None:
    """--db of a command that writes: `none` names no database there (it would create a file named none)."""
    if no_db(db):
        raise ValueError(f"--db none decides by the built-in rule alone (tuner decide); {command} writes into a "
                         "database: name its file, or leave --db out for $SWITCHYARD_DB or ./heuristics.db")
    return db


def dispatcher_for(db: str | None, device: str | None) -> Dispatcher:
    """The dispatcher `tuner decide` asks: from the database, or from the rule alone with --db none."""
    if no_db(db):
        return rule_only(device)
    try:
        require_db(db)
    except ValueError as e:
        raise ValueError(f"{e}; or pass --db none to decide by the built-in rule alone") from None
    return load(db, device)


def given_flags(ctx: typer.Context, names: Callable[[str], bool]) -> list[str]:
    """The flags typed on the command line (not defaults) of the parameters `names` accepts."""
    return [p.opts[0] for p in ctx.command.params if p.name and names(p.name)
            and getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"]


def csv(text: str | None, cast: Callable[[str], Any] = str, name: str = "") -> tuple[Any, ...] | None:
    if text is None:
        return None
    try:
        return tuple(cast(v.strip()) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of "
                                 f"{cast.__name__}", param_hint=name) from None


def _ray_flag(argv: list[str]) -> list[str]:
    """`--ray` with no address means a local Ray instance (click options need a value)."""
    out = list(argv)
    for i, a in enumerate(out):
        if a == "--ray" and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out.insert(i + 1, "local")
            break
    return out


def main() -> None:
    """Run the CLI; a bad flag is one readable line and exit code 2 (click's usage box is not)."""
    from typer import Abort
    try:        # this typer vendors click; older ones use click itself
        from typer._click.exceptions import UsageError
    except ImportError:
        from click.exceptions import UsageError
    argv = _ray_flag(sys.argv[1:])
    if not argv:                     # bare `tuner`: its help, and no error (click's would add an empty one)
        app(args=["--help"], standalone_mode=False)
        sys.exit(0)
    try:
        rc = app(args=argv, standalone_mode=False)
    except UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "tuner"
        err.print(f"[red]error:[/] {escape(e.format_message())} (see: {cmd} --help)", highlight=False, soft_wrap=True)
        sys.exit(2)
    except (Abort, KeyboardInterrupt):
        rc = INTERRUPTED
    if rc == INTERRUPTED:       # Ctrl-C (this typer returns 130 for it; older ones raise Abort)
        # each problem is stored in its own transaction as it finishes: nothing finished is lost
        err.print("interrupted: what finished is stored; rerun the same command to resume", soft_wrap=True)
    sys.exit(rc if isinstance(rc, int) else 0)


INTERRUPTED = 130
