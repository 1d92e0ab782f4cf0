-- started: marks a node execution running while its handler runs. A worker
-- calls it only once a handler has run for a while (WorkerOptions.
-- RunningAfter), so short executions pay nothing; the message stays in
-- flight (no acknowledgement) and the counter does not change.
-- A: node, iter, gen, attempt.
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if st ~= 'running' then return 'inactive' end
if A.gen < GEN then return 'stale' end
local x = xkey(A.node, A.iter)
local cur = redis.call('HGET', STATE, x)
if cur ~= 'queued' and cur ~= 'retrying' then return 'dup' end
-- A late call of an earlier attempt (its retry is already scheduled, or
-- the next attempt runs) changes nothing.
if tonumber(redis.call('HGET', STATE, 'att|' .. x) or '1') ~= A.attempt then return 'stale' end
redis.call('HSET', STATE, x, 'running')
event('node.started', 0, 'x', x, 'attempt', A.attempt)
return 'ok'
