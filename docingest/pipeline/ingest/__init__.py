"""Ingesting a file: the one sequence the facade and the job runner share, the runner, the sweep."""
