-- retry: schedules the next attempt of a node execution or for_each item
-- after a retryable failure. The execution stays counted while it waits.
-- A: node, iter, hop, gen, msg, item (-1 for the node), attempt (the one
--    that failed), due (ms), error, maxstate (lib.lua's overstate: the
--    error, which the event keeps, counts among the run's values; 'state',
--    writing nothing, when it does not fit).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
local x = xkey(A.node, A.iter)
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local op = 'r:' .. x .. ':' .. tostring(A.item) .. ':' .. tostring(A.attempt) .. ':' .. tostring(GEN)
if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return 'dup' end
local cur = redis.call('HGET', STATE, x)
if not cur or terminal(cur) then ack(); return 'dup' end
if A.item >= 0 then
  local ist = redis.call('HGET', ITEMS, x .. '|s|' .. A.item)
  if cur ~= 'running' or (ist ~= 'queued' and ist ~= 'retrying') then ack(); return 'dup' end
end

if overstate(#A.error) then return 'state' end

addop(op)
addbytes(#A.error)
local kind = 'exec'
if A.item >= 0 then
  kind = 'item'
  redis.call('HSET', ITEMS, x .. '|s|' .. A.item, 'retrying', x .. '|a|' .. A.item, tostring(A.attempt + 1))
else
  redis.call('HSET', STATE, x, 'retrying', 'att|' .. x, tostring(A.attempt + 1))
end
redis.call('ZADD', qtimers(g.q), A.due, token(kind, A.node, A.iter, A.hop, A.attempt + 1, A.item))
event('node.retry', 0, 'x', x, 'item', A.item, 'attempt', A.attempt + 1, 'due', A.due, 'error', A.error)
ack()
return 'ok'
