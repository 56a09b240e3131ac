"""The sources' Lua: a run requested or its cancel asked, a lease taken, renewed and given
back, and a run finished with its webhook event in one step (`EMIT` of the outbox), so a run
is never recorded finished without its event, nor an event sent for a run not recorded."""

from docingest.pipeline.outbox.scripts import EMIT

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

# KEYS: current run, due. ARGV: run id, due member, trigger. Returns {1} when queued, else
# {0, HGETALL of the run under way}.
REQUEST_RUN = (
    _NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
    return {0, redis.call('HGETALL', KEYS[1])}
end
redis.call('HSET', KEYS[1], 'run_id', ARGV[1], 'status', 'queued', 'trigger', ARGV[3],
    'created_at', tostring(now))
redis.call('ZADD', KEYS[2], now, ARGV[2])
return {1}
"""
)

# KEYS: current run, runs. ARGV: run id. Marks the run under way for cancelling only while it
# is that run ({'requested', HGETALL}): an HSET on a hash that FINISH_RUN just deleted would
# bring it back as a run that never ends. Else {'ended', run JSON} or {'missing'}.
CANCEL_RUN = """
if redis.call('HGET', KEYS[1], 'run_id') == ARGV[1] then
    redis.call('HSET', KEYS[1], 'cancel', '1')
    return {'requested', redis.call('HGETALL', KEYS[1])}
end
local ended = redis.call('HGET', KEYS[2], ARGV[1])
if ended then return {'ended', ended} end
return {'missing'}
"""

# KEYS: lease, due. ARGV: token, lease ms, due member. Takes the lease if free, and puts the
# source's due time past it, so other schedulers do not look at it again until it lapses.
TAKE_LEASE = (
    _NOW
    + """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', tonumber(ARGV[2])) then return 0 end
redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[2]) / 1000, ARGV[3])
return 1
"""
)

# KEYS: lease. ARGV: token, lease ms. 1 while the lease is still this token's.
RENEW_LEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
"""

# KEYS: lease. ARGV: token.
RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# KEYS: current, runs, run order, seen, jobs, due, lease. ARGV: run id, run JSON, started (a
# score), runs kept, next due ('' to leave the due set), due member, lease token, event,
# index, source name, event data JSON, then the outbox JSON (popped by EMIT).
FINISH_RUN = (
    _NOW
    + EMIT
    + """
local lease = redis.call('GET', KEYS[7])
if redis.call('HGET', KEYS[1], 'run_id') ~= ARGV[1] or (lease and lease ~= ARGV[7]) then
    return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], tonumber(ARGV[3]), ARGV[1])
local extra = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[4])
if extra > 0 then
    for _, old in ipairs(redis.call('ZRANGE', KEYS[3], 0, extra - 1)) do
        redis.call('HDEL', KEYS[2], old)
    end
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, extra - 1)
end
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5])
if ARGV[5] == '' then
    redis.call('ZREM', KEYS[6], ARGV[6])
else
    redis.call('ZADD', KEYS[6], tonumber(ARGV[5]), ARGV[6])
end
outbox_emit(ARGV[8], ARGV[9], 'source:' .. ARGV[10], 'data', ARGV[11], nil, nil)
return 1
"""
)
