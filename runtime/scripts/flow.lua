-- flow: a worker reached a flow node's execution, or one of its for_each
-- items (A.item >= 0), and is about to submit its child run A.child
-- (flow.go; docs/waiting.md, "Child flows"). It records the child before
-- the submit, so that a child that ends at once finds its parent waiting:
-- the execution waits (state waiting, field fl|x the child; an item keeps
-- its state), field ch|<child> lists the child (cancel, status) and
-- run|kids says the run has children (its end cancels those running), event
-- node.waiting (an item's: item.flow). It does not acknowledge the
-- message: the worker does, once the child is submitted (a redelivery
-- submits the same child again, a no-op).
-- A: node, iter, gen, item, child.
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
  if redis.call('HSETNX', STATE, 'ch|' .. A.child, x .. '#' .. A.item) == 1 then
    redis.call('HSET', STATE, 'run|kids', '1')
    event('item.flow', 0, 'x', x, 'item', A.item, 'child', A.child)
  end
  return 'ok'
end
if cur == 'waiting' and redis.call('HGET', STATE, 'fl|' .. x) == A.child then return 'ok' end
if cur ~= 'queued' and cur ~= 'running' and cur ~= 'retrying' then return 'dup' end
redis.call('HSET', STATE, x, 'waiting', 'fl|' .. x, A.child, 'ch|' .. A.child, x, 'run|kids', '1')
event('node.waiting', 0, 'x', x, 'child', A.child)
return 'ok'
