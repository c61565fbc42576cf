"""HTTP + TLS edge of the webhook: the Flask app, metrics, TLS contexts, and the gunicorn runner.

Importing this package imports nothing else: prometheus_client must not be imported before `serve` has
chosen the metrics directory (see webhook.server.gunicorn).
"""
