"""Code the client and the service share; standard library only."""
