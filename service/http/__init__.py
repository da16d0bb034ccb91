"""HTTP hardening, below the routes: what the service refuses before a request reaches them.

- protocol.py: the HTTP protocol uvicorn runs (well-formed requests only, a send deadline);
- header_deadline.py: request heads have a deadline;
- body_guard.py: request bodies have a content type, a size limit and a deadline;
- admission.py: at most ``max_connections`` requests served at once.
"""
