"""The web layer's middleware, below the routes: what the service refuses or records before a
request reaches them, and how errors become responses.

- protocol.py: the HTTP protocol uvicorn runs (well-formed requests only, a send deadline);
- header_deadline.py: request heads have a deadline;
- request_metrics.py: every request timed and counted by route and status;
- admission.py: at most ``max_connections`` requests served at once;
- auth.py: API keys and per-key rate limits;
- body_guard.py: request bodies have a content type, a size limit and a deadline;
- replicas.py: a glossary or document another replica holds is answered by it;
- errors.py: every error's status and body.
"""
