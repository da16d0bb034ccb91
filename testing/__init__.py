"""Test support that is not a test: runtimes and a server entry point that stand in for a model.

Tests and benchmarks import it (benchmarks/simulated_*.py measure the service around a fake
runtime); production packages (model, training, export, service) never do, which
tests/test_import_directions.py holds. It lives at the top level, not under service/, so that
the service's package (what pyproject.toml installs and the Dockerfile copies) carries no fakes,
and not under tests/, so that a benchmark needs no test module.
"""
