"""FastAPI service: app factory, settings, schemas, routes, metrics and runtimes (DESIGN §2)."""
