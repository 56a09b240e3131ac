"""Jobs: their data, their state in Redis, and the Lua scripts that change it."""
