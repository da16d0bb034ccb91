"""FastAPI service: app factory, settings, schemas, routes, metrics and runtimes (docs/design.md §2)."""
