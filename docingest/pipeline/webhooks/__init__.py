"""Sending the outbox's webhook deliveries: URL safety, signatures, payloads and the dispatcher."""
