-- flow: a worker reached a flow node's execution, or one of its for_each
-- items (A.item >= 0), and is about to submit its child run A.child
-- (flow.go; docs/waiting.md, "Child flows"). It records the child before
-- the submit, so that a child that ends at once finds its parent waiting:
-- the execution waits (state waiting, field fl|x the child; an item keeps
-- its state), field ch|<child> lists the child (cancel, status) and
-- run|kids says the run has children (its end cancels those running), event
-- node.waiting (an item's: item.flow). Field cp|<child> says the child is
-- pending: recorded, not started yet (start.lua deletes it when it starts
-- the child, which it does only while ch|<child> is there; a parent that
-- gives the child up first deletes both: flow.go's closeChild; status
-- shows no pending child). It does not acknowledge the message: the
-- worker does, once the child is submitted (a redelivery submits the same
-- child again, a no-op).
-- A message of an attempt that is over (the worker died after the
-- submit, the child failed and the next attempt is scheduled or runs) is
-- 'stale': it must not wait on its old child again.
-- With a due time (the node's timeout: due > 0), a token of kind
-- flowtimeout for this attempt (and item) goes into the node queue's
-- timers, once, when the child is first recorded: when it comes due on an
-- execution still waiting on that child, a worker cancels the child and
-- fails the attempt with code timeout (flow.go).
-- A: node, iter, gen, item, child, hop, attempt, due (ms; 0: no timeout).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
local x = xkey(A.node, A.iter)
if st ~= 'running' then return 'inactive' end
if A.gen < GEN then return 'stale' end
local cur = redis.call('HGET', STATE, x)
if A.item >= 0 then
  local ist = redis.call('HGET', ITEMS, x .. '|s|' .. A.item)
  if cur ~= 'running' or (ist ~= 'queued' and ist ~= 'retrying') then return 'dup' end
  if tonumber(redis.call('HGET', ITEMS, x .. '|a|' .. A.item) or '1') ~= A.attempt then return 'stale' end
  if redis.call('HSETNX', STATE, 'ch|' .. A.child, x .. '#' .. A.item) == 1 then
    redis.call('HSET', STATE, 'cp|' .. A.child, '1', 'run|kids', '1')
    if (A.due or 0) > 0 then
      redis.call('ZADD', qtimers(g.q), A.due, token('flowtimeout', A.node, A.iter, A.hop, A.attempt, A.item))
    end
    event('item.flow', 0, 'x', x, 'item', A.item, 'child', A.child)
  end
  return 'ok'
end
if cur == 'waiting' and redis.call('HGET', STATE, 'fl|' .. x) == A.child then return 'ok' end
if cur ~= 'queued' and cur ~= 'running' and cur ~= 'retrying' then return 'dup' end
if tonumber(redis.call('HGET', STATE, 'att|' .. x) or '1') ~= A.attempt then return 'stale' end
if redis.call('HSETNX', STATE, 'ch|' .. A.child, x) == 1 then
  redis.call('HSET', STATE, 'cp|' .. A.child, '1')
end
redis.call('HSET', STATE, x, 'waiting', 'fl|' .. x, A.child, 'run|kids', '1')
if (A.due or 0) > 0 then
  redis.call('ZADD', qtimers(g.q), A.due, token('flowtimeout', A.node, A.iter, A.hop, A.attempt, -1))
end
event('node.waiting', 0, 'x', x, 'child', A.child)
return 'ok'
