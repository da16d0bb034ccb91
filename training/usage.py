"""The command-line contract shared by every training CLI: a mistake a user can make is a
``UsageError``, printed as one line with exit code 2 (never argparse's usage block)."""
from __future__ import annotations

import argparse


class UsageError(Exception):
    pass


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        raise UsageError(message)
