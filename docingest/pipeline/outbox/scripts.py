"""The outbox's Lua: the part every state-changing job script includes (`EMIT`), and the
dispatcher's claim and resolve.

`EMIT` takes its keys from a JSON object the caller appends as the *last* ARGV
(`docingest.pipeline.outbox.store.outbox_arg`) and pops before the script reads its own arguments:
the keys of the outbox depend on the job's index and document, which only the script reads.
It needs `now` (the scripts' `_TIME`). A delivery is appended to its chain, the list of the
pending deliveries of one document to one target, and only a chain's head is in the due set,
so a document's later event waits until its earlier one is delivered or given up.
"""

EMIT = """
local OUTBOX = cjson.decode(table.remove(ARGV))
local outbox_count = 0
local function outbox_enqueue(target, name, url, secret, event, index, doc, data_field, data)
    outbox_count = outbox_count + 1
    local id = OUTBOX.id .. string.format('%02d', outbox_count)
    local chain = OUTBOX.chain .. target .. ':' .. index .. ':' .. doc
    local key = OUTBOX.delivery .. id
    redis.call('HSET', key, 'id', id, 'event', event, 'index', index, 'document_id', doc,
        'webhook', name, 'url', url, 'secret', secret, 'chain', chain, 'status', 'pending',
        'attempts', '0', 'created_at', tostring(now), data_field, data)
    if redis.call('RPUSH', chain, id) == 1 then redis.call('ZADD', OUTBOX.due, now, id) end
    if name ~= '' then
        local log = OUTBOX.log .. index .. ':' .. name
        redis.call('LPUSH', log, id)
        redis.call('LTRIM', log, 0, tonumber(OUTBOX.log_size) - 1)
    end
    redis.call('HINCRBY', OUTBOX.stats, 'pending', 1)
end
-- Enqueue `event` for each of the index's webhooks subscribed to it, and for the callback.
local function outbox_emit(event, index, doc, data_field, data, callback, callback_secret)
    local subs = redis.call('HGETALL', OUTBOX.subs .. index)
    for i = 1, #subs, 2 do
        local ok, sub = pcall(cjson.decode, subs[i + 1])
        if ok and type(sub) == 'table' and type(sub.events) == 'table' then
            for _, wanted in ipairs(sub.events) do
                if wanted == event then
                    outbox_enqueue('w:' .. subs[i], subs[i], '', '', event, index, doc,
                        data_field, data)
                    break
                end
            end
        end
    end
    if callback and callback ~= '' then
        outbox_enqueue('c:' .. redis.sha1hex(callback), '', callback, callback_secret or '',
            event, index, doc, data_field, data)
    end
end
-- Enqueue the job's terminal event, with the job as it now is (no secret in it).
local function outbox_emit_job(job_key, status)
    local raw = redis.call('HGETALL', job_key)
    local job = {}
    for i = 1, #raw, 2 do job[raw[i]] = raw[i + 1] end
    local callback, callback_secret = job.callback_url, job.callback_secret
    job.callback_secret = nil
    job.usage_carried = nil
    outbox_emit('job.' .. status, job.index, job.document_id, 'job', cjson.encode(job),
        callback, callback_secret)
end
"""

# KEYS: the deletes under way. ARGV: index, document_id, data JSON, the delete's field in
# KEYS[1], then the outbox JSON (popped by EMIT). The delete ends with its event.
EMIT_DELETED = (
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""
    + EMIT
    + """
outbox_emit('document.deleted', ARGV[1], ARGV[2], 'data', ARGV[3], nil, nil)
redis.call('HDEL', KEYS[1], ARGV[4])
return outbox_count
"""
)

# KEYS: due. ARGV: delivery prefix, most to claim, lease seconds, subscriptions prefix, how
# many due deliveries to look at, attempts allowed per target, a JSON object of the rooms left
# to busy targets, a JSON list of the slow targets, the room the slow ones share, seconds to
# put off a delivery whose target has no room (busy, slow).
# Returns the HGETALL of each claimed delivery, with its webhook's subscription JSON as
# `subscription` ('' when the webhook is gone) and its `target` (the receiver's origin); a
# claim pushes its due time past the lease, so the deliveries of a dispatcher that died are
# claimed again once it runs out. A delivery whose target has no room is put off, unclaimed, so
# the deliveries behind it (to other receivers) come to the front: the bulkhead of
# `docingest.pipeline.webhooks.targets`.
CLAIM_DUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local most = tonumber(ARGV[2])
local per_target = tonumber(ARGV[6])
local rooms = cjson.decode(ARGV[7])
local slow = {}
for _, target in ipairs(cjson.decode(ARGV[8])) do slow[target] = true end
local slow_room = tonumber(ARGV[9])
local function target_of(url)
    local origin = string.match(url or '', '^(%a[%w+.-]*://[^/?#]*)')
    if not origin then return '' end
    origin = string.lower((string.gsub(origin, '//[^@]*@', '//')))
    -- One receiver, however its URL is spelt: drop the scheme's default port.
    if string.sub(origin, 1, 7) == 'http://' then
        origin = (string.gsub(origin, ':80$', ''))
    elseif string.sub(origin, 1, 8) == 'https://' then
        origin = (string.gsub(origin, ':443$', ''))
    end
    return origin
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
local claimed = {}
for _, id in ipairs(ids) do
    if #claimed >= most then break end
    local key = ARGV[1] .. id
    if redis.call('HGET', key, 'status') ~= 'pending' then
        redis.call('ZREM', KEYS[1], id)
    else
        local webhook = redis.call('HGET', key, 'webhook')
        local sub, url = false, redis.call('HGET', key, 'url')
        if webhook and webhook ~= '' then
            sub = redis.call('HGET', ARGV[4] .. redis.call('HGET', key, 'index'), webhook)
            url = ''
            if sub then
                local ok, decoded = pcall(cjson.decode, sub)
                if ok and type(decoded) == 'table' and type(decoded.url) == 'string' then
                    url = decoded.url
                end
            end
        end
        local target = target_of(url)
        local room = rooms[target] or per_target
        if slow[target] and slow_room < room then room = slow_room end
        if room <= 0 then
            local defer = slow[target] and ARGV[11] or ARGV[10]
            redis.call('ZADD', KEYS[1], now + tonumber(defer), id)
        else
            rooms[target] = (rooms[target] or per_target) - 1
            if slow[target] then slow_room = slow_room - 1 end
            redis.call('HINCRBY', key, 'attempts', 1)
            redis.call('HSET', key, 'claimed_at', tostring(now))
            redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), id)
            local row = redis.call('HGETALL', key)
            if webhook and webhook ~= '' then
                table.insert(row, 'subscription')
                table.insert(row, sub or '')
            end
            table.insert(row, 'target')
            table.insert(row, target)
            table.insert(claimed, row)
        end
    end
end
return claimed
"""

# KEYS: due, stats. ARGV: delivery prefix, id, attempt, outcome (delivered | retry | failed |
# dropped), retry delay, response code ('' = none), error ('' = none), seconds to keep an
# ended delivery, milliseconds the attempt took.
# A retry is ignored unless `attempt` still owns the delivery (a later claim took it over);
# an end is taken from any attempt: the receiver has it (or it is over) whoever asked.
RESOLVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local key = ARGV[1] .. ARGV[2]
if redis.call('HGET', key, 'status') ~= 'pending' then return 0 end
local outcome = ARGV[4]
if outcome == 'retry' and redis.call('HGET', key, 'attempts') ~= ARGV[3] then return 0 end
redis.call('HSET', key, 'last_attempt_at', tostring(now), 'last_code', ARGV[6],
    'last_error', ARGV[7], 'last_duration_ms', ARGV[9])
if outcome == 'retry' then
    local due = now + tonumber(ARGV[5])
    redis.call('HSET', key, 'next_at', tostring(due))
    redis.call('ZADD', KEYS[1], due, ARGV[2])
    redis.call('HINCRBY', KEYS[2], 'retried', 1)
    return 1
end
redis.call('HSET', key, 'status', outcome, 'finished_at', tostring(now))
redis.call('HDEL', key, 'next_at', 'secret')
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], outcome, 1)
redis.call('HINCRBY', KEYS[2], 'pending', -1)
redis.call('EXPIRE', key, tonumber(ARGV[8]))
local chain = redis.call('HGET', key, 'chain')
if redis.call('LINDEX', chain, 0) == ARGV[2] then
    redis.call('LPOP', chain)
else
    redis.call('LREM', chain, 1, ARGV[2])
end
local next_id = redis.call('LINDEX', chain, 0)
if next_id then redis.call('ZADD', KEYS[1], 'NX', now, next_id) end
return 1
"""
