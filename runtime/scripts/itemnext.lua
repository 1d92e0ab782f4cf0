-- itemnext: the common case of itemdone.lua, without its generality, for
-- speed (as advance.lua is to complete.lua): a for_each item whose handler
-- succeeded (not an error result under a tolerance) and whose output fits
-- the run's max_state_bytes. The script writes exactly what itemdone
-- writes then — the operation key, the item's output and state, the
-- node's done count and next position, the next item's state and token
-- (or the collect token after the last item), the events, run|aux,
-- run|bytes and the counter — without lib.lua's prologue (only step.lua's),
-- without JSON to decode, and with fewer commands: one read and one write
-- of the state hash and of the items hash. When the run is unknown, its
-- graph is not the one the worker decided from (a patch), the output does
-- not fit, or the counter would reach zero (the run would end: settle's
-- work), it returns 'slow' before any write and the worker calls itemdone.
-- KEYS: its own layout, the keys it uses: 1 state, 2 events, 3 items,
--       4 applied, then for each of the run's queues (in the order of the
--       run's queues) its stream, 4+i.
-- ARGV: 1 node, 2 iter, 3 item (its index, a decimal integer), 4 output
--       (JSON text), 5 token gen, 6 now (ms), 7 index of the message's
--       queue in the run's queues (1-based), 8 message id, 9 run id,
--       10 index of the node's queue (graph field q: where the next item's
--       token and the collect token go), 11 the run's max_state_bytes
--       (0: none), 12 the graph suffix the worker decided from.
-- Written for Redis's Lua as advance.lua is (its header says the costs):
-- strings pass through as they came, numbers are parsed only where they
-- are computed with or checked.
local A = ARGV
local STATE, EVENTS, ITEMS, APPLIED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local node, iter, item, out, now, mid, run, gexp = A[1], A[2], A[3], A[4], A[6], A[8], A[9], A[12]
local mq, nq, maxst, ii = tonumber(A[7]), tonumber(A[10]), tonumber(A[11]), tonumber(A[3])
local qmsg = mq and mq > 0 and mq % 1 == 0 and KEYS[4 + mq]
local qnode = nq and nq > 0 and nq % 1 == 0 and KEYS[4 + nq]
-- The item's index is written into field names and the event as given:
-- only its canonical form names the fields itemdone would write.
if #A ~= 12 or not qmsg or not qnode or not maxst or not APPLIED or not ii or ii < 0 or ii % 1 ~= 0
    or tostring(ii) ~= item or not tonumber(A[5]) then
  return redis.error_reply('ERR wfc: bad itemnext call')
end
local x = node
if iter ~= '' then x = node .. '@' .. iter end

-- The run: status, generation, graph, counter, bytes stored, and the
-- for_each execution's state.
local r = call('HMGET', STATE, 'run|status', 'run|gen', 'run|graph', COUNTER, 'run|bytes', x)
if not r[1] or not r[2] or r[3] ~= gexp then return 'slow' end
local gen = r[2]
if r[1] ~= 'running' then call('XACK', qmsg, GROUP, mid); return 'inactive' end
if A[5] ~= gen and tonumber(A[5]) < tonumber(gen) then call('XACK', qmsg, GROUP, mid); return 'stale' end
local op = 'i:' .. x .. ':' .. item .. ':' .. gen
if r[6] ~= 'running' or call('SISMEMBER', APPLIED, op) == 1 then call('XACK', qmsg, GROUP, mid); return 'dup' end
-- The node's items: count, next position, this item's state, hop,
-- positions to run and done count.
local it = call('HMGET', ITEMS, x .. '|n', x .. '|next', x .. '|s|' .. item, x .. '|hop', x .. '|nt', x .. '|done')
if not it[1] or (it[3] ~= 'queued' and it[3] ~= 'retrying') then call('XACK', qmsg, GROUP, mid); return 'dup' end
local hop, nxt = it[4], tonumber(it[2])
if not hop or not nxt then return 'slow' end
local used = (r[5] or 0) + #out
if maxst > 0 and used > maxst then return 'slow' end
local done = (it[6] or 0) + 1
local last = done == tonumber(it[1])
-- The next position's item, queued now (expand's window: one done, one
-- more in flight).
local ni = nil
if nxt < tonumber(it[5] or '0') then
  ni = call('HGET', ITEMS, x .. '|t|' .. itos(nxt + 1))
  if not ni then return 'slow' end
end
local dc = -1
if ni then dc = dc + 1 end
if last then dc = dc + 1 end
local c = (r[4] or 0) + dc
if c <= 0 then return 'slow' end

-- Writes, in itemdone's order (its HINCRBYs as the values they make).
call('SADD', APPLIED, op)
call('HSET', STATE, 'run|aux', '1', 'run|bytes', tostring(used), COUNTER, itos(c))
if ni then
  call('HSET', ITEMS, x .. '|o|' .. item, out, x .. '|s|' .. item, 'done', x .. '|done', itos(done),
    x .. '|next', itos(nxt + 1), x .. '|s|' .. ni, 'queued')
else
  call('HSET', ITEMS, x .. '|o|' .. item, out, x .. '|s|' .. item, 'done', x .. '|done', itos(done))
end
call('XADD', EVENTS, '*', 'type', 'item.completed', 'ts', now, 'x', x, 'i', item, 'output', out, 'dc', '-1')
if ni then
  call('XADD', qnode, '*', 't', tokenjson('item', run, node, iter, hop, '1', ni, gen))
  call('XADD', EVENTS, '*', 'type', 'item.queued', 'ts', now, 'x', x, 'i', ni, 'dc', '1')
end
if last then
  call('XADD', qnode, '*', 't', tokenjson('fin', run, node, iter, hop, '1', '-1', gen))
  call('XADD', EVENTS, '*', 'type', 'node.collect', 'ts', now, 'x', x, 'dc', '1')
end
call('XACK', qmsg, GROUP, mid)
return 'ok'
