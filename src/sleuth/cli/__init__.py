"""The ``sleuth`` command line (typer), one thin module per command group; bad input: one line on
stderr, exit code 2. The commands only parse options and call the library."""

from sleuth.cli.common import DEFAULT_REPLY_TOKENS, app, cli_errors, console

# Importing a command module registers its commands; the order is the order of `sleuth --help`.
# isort: off
from sleuth.cli import ingest, index, adapt, tools, query, serve, datagen, train, demo  # noqa: F401, E402
# isort: on

__all__ = ["DEFAULT_REPLY_TOKENS", "app", "cli_errors", "console"]
