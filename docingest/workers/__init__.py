"""Celery: the app factory, the (thin) tasks, and the per-process services they use."""
