"""service/runtime/cpu_allocator.py: glibc takes every threshold; another C library is left alone."""
from __future__ import annotations

import ctypes.util
import platform

import pytest

from service.runtime import cpu_allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_accepts_every_threshold():
    # mallopt answers 0 for a value out of its range.
    assert cpu_allocator.retain_freed_memory() is True


def test_without_a_c_library_nothing_is_set(monkeypatch):
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert cpu_allocator.retain_freed_memory() is False


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch):
    class NoMallopt:
        def __init__(self, name):
            pass

    monkeypatch.setattr(cpu_allocator.ctypes, "CDLL", NoMallopt)
    assert cpu_allocator.retain_freed_memory() is False
