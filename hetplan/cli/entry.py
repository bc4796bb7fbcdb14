"""The ``hetplan`` console script: stops cleanly on Ctrl-C or SIGTERM while Python is still importing.

:func:`hetplan.cli.main.main` installs hetplan's signal handlers, but only once its module and every command
module are imported (typer, rich, pydantic: a few hundred milliseconds), and Ctrl-C in that window printed a
``KeyboardInterrupt`` traceback. Here handlers that end the process at once (nothing has been written yet) are
installed first, then the CLI is imported and run.
"""

from __future__ import annotations

import os
import signal
from types import FrameType


def _early(signum: int, frame: FrameType | None) -> None:
    name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
    os.write(2, f"Interrupted ({name}) while starting: nothing was written\n".encode())
    os._exit(128 + signum)  # mid-import: no clean-up to run, and raising here could leave a module half-made


def main() -> None:
    """Entry point of the ``hetplan`` command (``[project.scripts]``)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # a shell's background job ignores SIGINT: keep that
            signal.signal(sig, _early)
    from hetplan.cli.main import main as run

    run()


if __name__ == "__main__":
    main()
