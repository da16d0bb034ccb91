"""model/cpu_allocator.py: glibc takes every threshold; another C library is left alone; training on
the CPU keeps every block in the heap."""
from __future__ import annotations

import ctypes.util
import platform

import pytest

from model import cpu_allocator
from training import loop


class RecordingLibc:
    """A C library whose mallopt accepts everything and remembers what it was given."""

    calls: list[tuple[int, int]] = []

    def __init__(self, name):
        RecordingLibc.calls = []
        self.mallopt = self._mallopt

    @staticmethod
    def _mallopt(param, value):
        RecordingLibc.calls.append((param, value))
        return 1


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
@pytest.mark.parametrize("heap_only", [False, True])
def test_glibc_accepts_every_threshold(heap_only):
    # mallopt answers 0 for a value out of its range.
    assert cpu_allocator.retain_freed_memory(heap_only=heap_only) is True


@pytest.mark.parametrize("heap_only, expected", [
    (False, [(-3, 32 * 2**20), (-1, 2**30), (-2, 64 * 2**20)]),
    # M_MMAP_MAX (-4) at 0: no block is mapped on its own, whatever its size.
    (True, [(-3, 32 * 2**20), (-1, 2**30), (-2, 64 * 2**20), (-4, 0)]),
])
def test_the_settings_given_to_mallopt(monkeypatch, heap_only, expected):
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libc.so.6")
    monkeypatch.setattr(cpu_allocator.ctypes, "CDLL", RecordingLibc)
    assert cpu_allocator.retain_freed_memory(heap_only=heap_only) is True
    assert RecordingLibc.calls == expected


def test_a_refused_setting_is_reported(monkeypatch):
    class Refusing(RecordingLibc):
        @staticmethod
        def _mallopt(param, value):
            return 0 if param == cpu_allocator.M_MMAP_MAX else 1

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libc.so.6")
    monkeypatch.setattr(cpu_allocator.ctypes, "CDLL", Refusing)
    assert cpu_allocator.retain_freed_memory(heap_only=False) is True
    assert cpu_allocator.retain_freed_memory(heap_only=True) is False


def test_without_a_c_library_nothing_is_set(monkeypatch):
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert cpu_allocator.retain_freed_memory() is False


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch):
    class NoMallopt:
        def __init__(self, name):
            pass

    monkeypatch.setattr(cpu_allocator.ctypes, "CDLL", NoMallopt)
    assert cpu_allocator.retain_freed_memory() is False


@pytest.mark.parametrize("device, expected", [("cpu", [True]), ("cuda", [])])
def test_training_on_the_cpu_keeps_every_block_in_the_heap(monkeypatch, device, expected):
    """On CUDA the host allocates little; the process's allocator is left as it is."""
    calls = []
    monkeypatch.setattr(loop, "retain_freed_memory", lambda heap_only=False: calls.append(heap_only) or True)
    monkeypatch.setattr(loop.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(loop, "avoid_per_shape_attention_plans", lambda device: None)
    assert loop.resolve_device(device).type == device
    assert calls == expected
