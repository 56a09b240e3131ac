"""The Lua scripts that change job hashes atomically (see `docingest.pipeline.jobs.state`).

Each reads the time from Redis, so every host agrees on it. Those that end a job (CLAIM when
it finds the job cancelled or out of attempts, FINISH, COMPLETE, CANCEL of a queued job,
UNQUEUEABLE) write its webhook deliveries in the same step
(`docingest.pipeline.outbox.scripts.EMIT`: they take the outbox's JSON as their last argument), so
the event is never lost nor sent for a change that did not happen.
"""

from docingest.pipeline.outbox.scripts import EMIT

_TIME = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

# KEYS: job, running, queued. ARGV: job_id, max_attempts, stale_after, error, outbox.
CLAIM = (
    _TIME
    + EMIT
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', 0} end
if status == 'completed' or status == 'failed' or status == 'cancelled' then
    return {'finished', 0}
end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if status == 'processing' then
    local beat = tonumber(redis.call('HGET', KEYS[1], 'heartbeat_at') or '0')
    if now - beat < tonumber(ARGV[3]) then return {'busy', attempts} end
end
local function finish(new_status, error)
    redis.call('HSET', KEYS[1], 'status', new_status, 'finished_at', tostring(now),
        'error', error)
    redis.call('HDEL', KEYS[1], 'stage')
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('ZREM', KEYS[3], ARGV[1])
    outbox_emit_job(KEYS[1], new_status)
end
if redis.call('HGET', KEYS[1], 'cancel_requested') == '1' then
    finish('cancelled', 'null')
    return {'cancelled', attempts}
end
if attempts >= tonumber(ARGV[2]) then
    finish('failed', ARGV[4])
    return {'exhausted', attempts}
end
attempts = attempts + 1
redis.call('HSET', KEYS[1], 'status', 'processing', 'attempts', attempts,
    'heartbeat_at', tostring(now))
if not redis.call('HGET', KEYS[1], 'started_at') then
    redis.call('HSET', KEYS[1], 'started_at', tostring(now))
end
redis.call('HDEL', KEYS[1], 'stage')
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return {'claimed', attempts}
"""
)

# KEYS: job, running. ARGV: job_id, attempt, progress ('' = none), field, value, ...
UPDATE = (
    _TIME
    + """
if redis.call('HGET', KEYS[1], 'status') ~= 'processing' then return 0 end
if redis.call('HGET', KEYS[1], 'attempts') ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' then
    local old = tonumber(redis.call('HGET', KEYS[1], 'progress') or '0')
    if tonumber(ARGV[3]) > old then redis.call('HSET', KEYS[1], 'progress', ARGV[3]) end
end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], 'heartbeat_at', tostring(now))
redis.call('ZADD', KEYS[2], now, ARGV[1])
return 1
"""
)

# KEYS: job, running, queued, finished-counters.
# ARGV: job_id, attempt, status, ttl, f, v, ..., outbox.
FINISH = (
    _TIME
    + EMIT
    + """
if redis.call('HGET', KEYS[1], 'status') ~= 'processing' then return 0 end
if redis.call('HGET', KEYS[1], 'attempts') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'finished_at', tostring(now))
redis.call('HDEL', KEYS[1], 'stage')
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[4], ARGV[3], 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
outbox_emit_job(KEYS[1], ARGV[3])
return 1
"""
)

# FINISH for a completed job, adding its usage to its index's once per job id (a marker in
# the job hash, which no retry clears): a redelivered or replayed completion adds nothing.
# KEYS: job, running, queued, finished-counters, index usage, usage ranking, usage of all.
# ARGV: job_id, attempt, ttl, index, n, n usage name/value pairs, then field/value pairs,
# then the outbox.
COMPLETE = (
    _TIME
    + EMIT
    + """
if redis.call('HGET', KEYS[1], 'status') ~= 'processing' then return 0 end
if redis.call('HGET', KEYS[1], 'attempts') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'status', 'completed', 'finished_at', tostring(now))
redis.call('HDEL', KEYS[1], 'stage')
local n = tonumber(ARGV[5])
for i = 6 + 2 * n, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[4], 'completed', 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
if redis.call('HSETNX', KEYS[1], 'usage_counted', '1') == 1 then
    redis.call('HINCRBY', KEYS[5], 'jobs', 1)
    redis.call('HINCRBY', KEYS[7], 'jobs', 1)
    for i = 6, 5 + 2 * n, 2 do
        local amount = tonumber(ARGV[i + 1])
        redis.call('HINCRBY', KEYS[5], ARGV[i], amount)
        redis.call('HINCRBY', KEYS[7], ARGV[i], amount)
        if ARGV[i] == 'input_tokens' then redis.call('ZINCRBY', KEYS[6], amount, ARGV[4]) end
    end
    redis.call('ZINCRBY', KEYS[6], 0, ARGV[4])
end
outbox_emit_job(KEYS[1], 'completed')
return 1
"""
)

# KEYS: job, running, queued. ARGV: job_id, attempt ('' = any), stale_after ('' = any), note,
# usage carried to the next attempt ('' = unchanged).
REQUEUE = (
    _TIME
    + """
if redis.call('HGET', KEYS[1], 'status') ~= 'processing' then return 0 end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'attempts') ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' then
    local beat = tonumber(redis.call('HGET', KEYS[1], 'heartbeat_at') or '0')
    if now - beat < tonumber(ARGV[3]) then return 0 end
end
redis.call('HSET', KEYS[1], 'status', 'queued', 'queued_at', tostring(now),
    'last_error', ARGV[4])
if ARGV[5] and ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'usage_carried', ARGV[5]) end
redis.call('HDEL', KEYS[1], 'stage')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], now, ARGV[1])
return 1
"""
)

# KEYS: job, queued, finished-counters. ARGV: job_id, ttl, outbox. Returns 'stopped' (a queued job,
# now cancelled), 'requested' (a processing job, asked to stop), 'missing' or the refusing
# status; never 'cancelled' on success, which would be taken for an already-cancelled job.
CANCEL = (
    _TIME
    + EMIT
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status == 'queued' then
    redis.call('HSET', KEYS[1], 'status', 'cancelled', 'finished_at', tostring(now),
        'cancel_requested', '1')
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('HINCRBY', KEYS[3], 'cancelled', 1)
    redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
    outbox_emit_job(KEYS[1], 'cancelled')
    return 'stopped'
end
if status == 'processing' then
    redis.call('HSET', KEYS[1], 'cancel_requested', '1')
    return 'requested'
end
return status
"""
)

# A job the queue never took (the broker was down): failed at once, with its event.
# KEYS: job, queued, finished-counters. ARGV: job_id, ttl, error JSON, outbox.
UNQUEUEABLE = (
    _TIME
    + EMIT
    + """
if not redis.call('HGET', KEYS[1], 'status') then return 0 end
redis.call('HSET', KEYS[1], 'status', 'failed', 'finished_at', tostring(now), 'error', ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'failed', 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
outbox_emit_job(KEYS[1], 'failed')
return 1
"""
)

# KEYS: job, queued. ARGV: job_id. Returns 'retried', 'missing' or the refusing status.
RETRY = (
    _TIME
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status ~= 'failed' and status ~= 'cancelled' then return status end
redis.call('HSET', KEYS[1], 'status', 'queued', 'queued_at', tostring(now), 'progress', '0',
    'attempts', '0', 'pages_done', '0', 'chunks_embedded', '0', 'chunks_done', '0',
    'cancel_requested', '0', 'error', 'null', 'result', 'null')
redis.call('HDEL', KEYS[1], 'stage', 'finished_at', 'started_at', 'version', 'pages_total',
    'chunks_total')
redis.call('PERSIST', KEYS[1])
redis.call('ZADD', KEYS[2], now, ARGV[1])
return 'retried'
"""
)

# KEYS: index usage, usage ranking, usage of all. ARGV: index. Subtracts the index's usage
# from the totals and drops it, in one step, so a completion racing it is counted in both or
# in neither.
FORGET_USAGE = """
local raw = redis.call('HGETALL', KEYS[1])
for i = 1, #raw, 2 do  -- (never -0: Lua writes it '-0', which HINCRBY refuses)
    local amount = tonumber(raw[i + 1])
    if amount ~= 0 then redis.call('HINCRBY', KEYS[3], raw[i], 0 - amount) end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return #raw / 2
"""
