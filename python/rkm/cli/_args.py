"""Argument types and the parser of the ``rkm`` commands: every argument is checked when it is parsed, before any
work starts, and a bad one ends the command with one line on stderr and exit status 2 (argparse's usage error)."""

import argparse
import os
import sys
import tempfile
from pathlib import Path

from rkm._utils.threads import check_n_threads, thread_count


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, ``PROG: error: MESSAGE (PROG --help: usage)``, status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help: usage)\n")


def _integer(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def n_threads(text):
    """``--n-threads``: rkm's n_threads (k > 0, or -k for all cores but k - 1), kept as given."""
    try:
        return check_n_threads(_integer(text))
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f"n_threads must be a positive integer, or -k for all cores but k - 1 (-1: all cores), got {text!r}"
        ) from None


def thread_total(text):
    """``--n-threads`` of a benchmark: n_threads resolved to the number of threads it runs (-1: all cores), so that
    the report names the count that ran."""
    return thread_count(n_threads(text))


def positive_int(text):
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _reason(error):
    return error.strerror or str(error)


def output_folder(text):
    """``--output`` folder: an existing folder that accepts files, or one that can be created (nothing is created
    here; the command makes it when it writes)."""
    path = Path(os.path.expanduser(text))
    if path.exists():
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text} exists and is not a folder")
        try:
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as error:
            raise argparse.ArgumentTypeError(f"cannot write into the folder {text} ({_reason(error)})") from None
        return path
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"cannot create the folder {text}: {ancestor} is not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(dir=ancestor))
    except OSError as error:
        raise argparse.ArgumentTypeError(
            f"cannot create the folder {text}: no folder can be made in {ancestor} ({_reason(error)})"
        ) from None
    return path


def output_file(text):
    """``--output`` file: an existing file that can be written, or a new one in an existing folder that accepts
    files. The file is left as it was (a probe file is removed)."""
    path = Path(os.path.expanduser(text))
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    if path.exists():
        try:
            with open(path, "a"):
                pass
        except OSError as error:
            raise argparse.ArgumentTypeError(f"cannot write {text} ({_reason(error)})") from None
        return text
    folder = path.absolute().parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: the folder {folder} does not exist")
    try:
        with open(path, "x"):
            pass
        path.unlink()
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {text} ({_reason(error)})") from None
    return text


def fail(prog, error, status=1):
    """End a command that failed while running (a file it could not write): one line on stderr, no traceback."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return status
