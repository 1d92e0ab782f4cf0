-- expand: starts a for_each node: stores its items and queues the first
-- ones (at most parallel at a time; 0 means all). After a partial retry,
-- items that were done in an earlier generation with the same value keep
-- their outputs and are not queued again.
-- A: node, iter, hop, gen, msg, items (list of JSON texts), parallel,
--    maxstate (lib.lua's overstate: 'state', writing nothing, when the
--    items do not fit).
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

-- The items to run: all, except those done before with the same value.
local todo, kept = {}, 0
local prev = tonumber(redis.call('HGET', ITEMS, x .. '|n') or '0')
for i = 0, n - 1 do
  local keep = false
  if prev == n and redis.call('HGET', ITEMS, x .. '|s|' .. i) == 'done' then
    keep = redis.call('HGET', ITEMS, x .. '|i|' .. i) == A.items[i + 1]
  end
  if keep then kept = kept + 1 else todo[#todo + 1] = i end
end

local size = 0
for i = 1, n do size = size + #A.items[i] end
if overstate(size) then return 'state' end

addop(op)
addbytes(size)
local k = #todo
if A.parallel > 0 and A.parallel < k then k = A.parallel end
redis.call('HSET', STATE, x, 'running')
redis.call('HSET', ITEMS, x .. '|n', n, x .. '|next', k, x .. '|done', kept, x .. '|kept', kept,
  x .. '|hop', tostring(A.hop), x .. '|nt', #todo)
for i = 1, n do
  if #todo == n or redis.call('HGET', ITEMS, x .. '|s|' .. (i - 1)) ~= 'done' then
    redis.call('HSET', ITEMS, x .. '|i|' .. (i - 1), A.items[i])
  end
end
-- The items to run in order, one field each (x|t|<position>), so that
-- itemdone finds the next one in O(1) (a list in one field made a
-- for_each quadratic: 20,000 items took minutes).
for p, i in ipairs(todo) do redis.call('HSET', ITEMS, x .. '|s|' .. i, 'waiting', x .. '|t|' .. p, i) end
event('node.expanded', -1, 'x', x, 'n', n, 'kept', kept)
for p = 1, k do
  local i = todo[p]
  redis.call('HSET', ITEMS, x .. '|s|' .. i, 'queued')
  redis.call('XADD', qstream(g.q), '*', 't', token('item', A.node, A.iter, A.hop, 1, i))
  event('item.queued', 1, 'x', x, 'i', i)
end
if #todo == 0 then
  redis.call('XADD', qstream(g.q), '*', 't', token('fin', A.node, A.iter, A.hop, 1, -1))
  event('node.collect', 1, 'x', x)
end
ack()
settle()
return 'ok'
