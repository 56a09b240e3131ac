"""docingest pipeline: the ingestion stages as plain, testable Python.

Data flows detect → extract → metadata → chunk → embed → store; nothing here imports
`api` or `workers`.
"""
