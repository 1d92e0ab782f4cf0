-- expand: starts a for_each node: stores its items and queues the first
-- ones (at most parallel at a time; 0 means all).
-- A: node, iter, hop, gen, msg, items (list of JSON texts), parallel.
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
local n = #A.items
if n == 0 then return fail('expand needs at least one item') end
local x = xkey(A.node, A.iter)
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local op = 'e:' .. x .. ':' .. tostring(GEN)
if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return 'dup' end
local cur = redis.call('HGET', STATE, x)
if cur ~= 'queued' and cur ~= 'retrying' then ack(); return 'dup' end

redis.call('SADD', APPLIED, op)
local k = n
if A.parallel > 0 and A.parallel < n then k = A.parallel end
redis.call('HSET', STATE, x, 'running')
redis.call('HSET', ITEMS, x .. '|n', n, x .. '|next', k, x .. '|done', 0, x .. '|hop', tostring(A.hop))
for i = 1, n do redis.call('HSET', ITEMS, x .. '|i|' .. (i - 1), A.items[i]) end
event('node.expanded', -1, 'x', x, 'n', n)
for i = 0, k - 1 do
  redis.call('HSET', ITEMS, x .. '|s|' .. i, 'queued')
  redis.call('XADD', qstream(g.q), '*', 't', token('item', A.node, A.iter, A.hop, 1, i))
  event('item.queued', 1, 'x', x, 'i', i)
end
ack()
settle()
return 'ok'
