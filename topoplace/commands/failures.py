"""Failures every command may meet, said in one line with the exit code the CLI promises.

A command that meets no broker, cannot listen where it was told, or finds its reader gone (`… | head`)
must not print a traceback: these are the environment's answers, not bugs. Anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys

from topoplace.commands.exit_codes import BAD_INPUT, NO_PLACE

# Binding a listening socket: the address is not this machine's, the port is taken, or privileged.
_LISTEN_ERRNOS = (errno.EADDRNOTAVAIL, errno.EADDRINUSE, errno.EACCES)


def failure_line(args: argparse.Namespace, exc: BaseException) -> tuple[int, str] | None:
    """(exit code, message) for a failure of the environment; None for anything else (a bug)."""
    from aiokafka.errors import KafkaConnectionError

    if isinstance(exc, KafkaConnectionError):  # as `explain` and `topics ensure` say it: the answer is no
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP", "")
        return NO_PLACE, f"no Kafka broker answered at KAFKA_BOOTSTRAP={bootstrap!r}: {exc}"
    if isinstance(exc, OSError) and exc.errno in _LISTEN_ERRNOS and hasattr(args, "port"):
        where = f"{getattr(args, 'host', '')}:{args.port}"
        return BAD_INPUT, f"--host/--port {where}: cannot listen there: {exc.strerror}"
    if isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        return BAD_INPUT, f"nothing answered: {exc.strerror}"
    return None


def reader_gone() -> int:
    """stdout's reader closed early: end quietly (Python's own advice), as `head` expects of a writer."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the flush at exit must not raise again
    except OSError:
        pass
    return NO_PLACE
