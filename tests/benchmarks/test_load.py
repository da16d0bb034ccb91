"""The load benchmark (benchmarks/load.py): its clients spread over load-generator processes,
a process's CPU time read from /proc, and one short run end to end against the simulated server."""
import os
import re
import sys
import time

import pytest

from benchmarks import load


@pytest.mark.parametrize("clients, processes, expected", [
    (7, 3, [3, 2, 2]),
    (64, 4, [16, 16, 16, 16]),
    (2, 4, [1, 1]),  # never an empty process
    (1, 1, [1]),
])
def test_clients_are_shared_out_as_evenly_as_they_can_be(clients, processes, expected):
    assert load.shares(clients, processes) == expected


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_process_cpu_time_is_read_from_proc():
    before = load.process_cpu_seconds(os.getpid())
    spent = time.process_time()
    while time.process_time() - spent < 0.2:  # busy, so that the kernel's tick count moves
        pass
    after = load.process_cpu_seconds(os.getpid())
    # /proc counts in clock ticks (10 ms here): 0.2 s of this process's CPU time reads as 0.2 s ± a tick or two.
    assert after - before == pytest.approx(0.2, abs=0.05)
    assert load.process_cpu_seconds(2**22 + 1) is None  # beyond pid_max: no such process


def test_a_run_spreads_its_clients_over_processes_and_reports_the_server_cpu(tmp_path):
    out = tmp_path / "load.md"
    code = load.main(["--serve", "--batching", "on", "--simulate-latency", "1:1", "--clients", "3",
                      "--client-processes", "2", "--duration", "1.5", "--warmup", "0.5", "--out", str(out)])
    assert code == 0
    row = next(line for line in out.read_text().splitlines() if line.startswith("| on | 3 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[2]) > 0 and cells[8] == "0"  # requests answered, no errors
    assert float(cells[9]) > 0  # the server's CPU time per request, read from /proc
    assert re.fullmatch(r"2 process\(es\), busiest \d+ %", cells[10])


def test_a_url_that_answers_nothing_is_one_line_and_exit_2(tmp_path, capsys):
    from testing.live_server import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert load.main(["--url", url, "--clients", "1", "--duration", "0.2", "--warmup", "0",
                      "--out", str(tmp_path / "load.md")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {url}: ConnectError: ") and err.count("\n") == 1  # httpx words the rest
    assert not (tmp_path / "load.md").exists()
