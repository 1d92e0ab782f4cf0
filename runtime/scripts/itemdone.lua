-- itemdone: records the output of one for_each item, queues the next item,
-- and when every item is done queues the node's collect token ("fin"),
-- which a worker turns into the node's completion.
-- A: node, iter, gen, msg, item, output (JSON text); failed (true: output
--    is the item's error result, {index, error}, under the node's
--    tolerance: count, or percent of the items), which replies 'over',
--    writing nothing, when one more failure is more than tolerated;
--    maxstate (lib.lua's overstate): 'state', writing nothing, when the
--    output does not fit.
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
local x = xkey(A.node, A.iter)
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local op = 'i:' .. x .. ':' .. tostring(A.item) .. ':' .. tostring(GEN)
if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return 'dup' end
if redis.call('HGET', STATE, x) ~= 'running' then ack(); return 'dup' end
local it = redis.call('HMGET', ITEMS, x .. '|n', x .. '|next', x .. '|s|' .. A.item, x .. '|hop', x .. '|nt')
if not it[1] or (it[3] ~= 'queued' and it[3] ~= 'retrying') then ack(); return 'dup' end

local n, nxt, hop = tonumber(it[1]), tonumber(it[2]), tonumber(it[4])
if A.failed then
  local limit = A.count or 0
  if (A.percent or 0) > 0 then limit = math.floor(n * A.percent / 100) end
  if tonumber(redis.call('HGET', ITEMS, x .. '|failed') or '0') + 1 > limit then return 'over' end
end

if overstate(#A.output) then return 'state' end

addop(op)
addbytes(#A.output)
local nt = tonumber(it[5] or '0')
if A.failed then
  redis.call('HSET', ITEMS, x .. '|o|' .. A.item, A.output, x .. '|s|' .. A.item, 'failed')
  redis.call('HINCRBY', ITEMS, x .. '|failed', 1)
  event('item.failed', -1, 'x', x, 'i', A.item, 'output', A.output)
else
  redis.call('HSET', ITEMS, x .. '|o|' .. A.item, A.output, x .. '|s|' .. A.item, 'done')
  event('item.completed', -1, 'x', x, 'i', A.item, 'output', A.output)
end
local done = redis.call('HINCRBY', ITEMS, x .. '|done', 1)
if nxt < nt then
  local i = redis.call('HGET', ITEMS, x .. '|t|' .. (nxt + 1))
  redis.call('HSET', ITEMS, x .. '|next', nxt + 1, x .. '|s|' .. i, 'queued')
  redis.call('XADD', qstream(g.q), '*', 't', token('item', A.node, A.iter, hop, 1, i))
  event('item.queued', 1, 'x', x, 'i', i)
end
if done == n then
  redis.call('XADD', qstream(g.q), '*', 't', token('fin', A.node, A.iter, hop, 1, -1))
  event('node.collect', 1, 'x', x)
end
ack()
settle()
return 'ok'
