"""Fetching every pinned package into the cache, a batch at a time per worker (downloads wait on
the network, extraction on one core each)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

from training.corpus.archive import Source, fetch_batch, is_fetched

BATCH = 25


def fetch_all(sources: Sequence[Source], cache: Path, *, workers: int = 2, mirror: str | None = None,
              say: Callable[[str], None] = lambda line: None) -> dict[str, str]:
    """Fetch every source not in the cache yet; returns {package: error} for those that failed."""
    cache.mkdir(parents=True, exist_ok=True)
    todo = [source for source in sources if not is_fetched(source, cache)]
    batches = [todo[i:i + BATCH] for i in range(0, len(todo), BATCH)]
    failures: dict[str, str] = {}

    def one(batch: Sequence[Source]) -> None:
        try:
            fetch_batch(batch, cache, mirror)
        except (RuntimeError, OSError, EOFError) as error:
            # Retry one at a time: one package gone from the mirror must not lose its batch.
            for source in batch:
                if is_fetched(source, cache):
                    continue
                try:
                    fetch_batch([source], cache, mirror)
                except (RuntimeError, OSError, EOFError) as single:
                    failures[source.package] = str(single)
                    say(f"failed: {source.package}: {single}")

    say(f"{len(sources) - len(todo)} of {len(sources)} packages cached; fetching {len(todo)}")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done, _ in enumerate(pool.map(one, batches), start=1):
            say(f"fetched batch {done}/{len(batches)}")
    return failures
