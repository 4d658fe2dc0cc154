"""What every pool worker process of the project does first."""

from __future__ import annotations

import signal


def ignore_interrupts() -> None:
    """Ignore SIGINT in a pool worker: Ctrl-C reaches the whole process group, and the parent, which
    gets it too, stops the pool (``Pool.__exit__`` terminates the workers), so a worker prints no
    ``KeyboardInterrupt`` traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
