"""Sending the outbox's deliveries: URL safety (`urls`), signatures (`signing`), the payload
(`payload`), one attempt (`sender`) and the dispatcher that claims and retries (`dispatcher`).
"""
