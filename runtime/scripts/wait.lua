-- wait: a worker reached a task whose handler is the built-in wait, a
-- durable timer (docs/waiting.md, "Durable timers"), due later. It parks
-- the execution: state waiting, its due time in field wt|x, a token of
-- kind wake in the node queue's timers at that time, event node.waiting;
-- and acknowledges the exec message without completing the execution, so
-- that its counter unit stays held and no worker holds anything. The wake
-- token, once promoted, completes it (a worker's wake, through complete).
-- A: node, iter, hop, gen, msg, due (ms).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
local x = xkey(A.node, A.iter)
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local cur = redis.call('HGET', STATE, x)
if cur ~= 'queued' and cur ~= 'running' and cur ~= 'retrying' then ack(); return 'dup' end

redis.call('HSET', STATE, x, 'waiting', 'wt|' .. x, A.due)
redis.call('ZADD', qtimers(g.q), A.due, token('wake', A.node, A.iter, A.hop, 1, -1))
event('node.waiting', 0, 'x', x, 'due', A.due)
ack()
return 'ok'
