"""The `docingest` command line."""
