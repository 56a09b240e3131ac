"""Parsing untrusted files in a limited child: the parent, the fork server, their messages."""
