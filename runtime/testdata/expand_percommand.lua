-- The expand.lua of before its writes were batched (a command per item
-- and field), kept for TestExpandWritesWhatItWrote: the batched script
-- must write exactly what this one writes.
-- expand: starts a for_each node: stores its items and queues the first
-- ones (at most parallel in flight; 0 means all). After a partial retry,
-- items that were done in an earlier generation with the same value keep
-- their outputs and are not queued again.
--
-- A long list is loaded in chunks, one call each, so that no call holds
-- Redis for long (a 100,000-item list in one call held it for half a
-- second): the worker sends items from..from+#items-1 of n, in order. The
-- first chunk starts the load (the node is running from then on); the
-- cursor <x>|ld (items loaded, in generation <x>|lg) says where the next
-- chunk starts, so a redelivered message (its worker died between chunks)
-- continues where the load stopped: a chunk that does not start at the
-- cursor changes nothing and replies 'at:<cursor>'. Until the last chunk
-- the load holds the exec token's unit of the counter, so that the run
-- does not end while items are still to come, and the message is not
-- acknowledged. <x>|h, the worker's hash of the whole list, must be the
-- same for every chunk (reply 'changed': the list evaluated differently
-- on a redelivery).
-- A: node, iter, hop, gen, msg, items (list of JSON texts), parallel;
--    from (default 0), n (default #items), h (default ''); size (the
--    bytes of all n items) and maxstate: the first chunk counts the whole
--    list in the run's stored values (lib.lua's overstate: 'state',
--    writing nothing, when it does not fit).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
local c = #A.items
local from, n, h = A.from or 0, A.n or c, A.h or ''
if c == 0 then return fail('expand needs at least one item') end
if from < 0 or from + c > n then return fail('expand: items ' .. from .. '+' .. c .. ' out of ' .. n) end
local x = xkey(A.node, A.iter)
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local cur = redis.call('HGET', STATE, x)
local first = cur == 'queued' or cur == 'retrying'
local op = 'e:' .. x .. ':' .. tostring(GEN)
if first then
  if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return 'dup' end
  if from ~= 0 then return 'at:0' end
else
  if cur ~= 'running' then ack(); return 'dup' end
  local l = redis.call('HMGET', ITEMS, x .. '|lg', x .. '|ld', x .. '|n', x .. '|h')
  local ld = tonumber(l[2] or '')
  -- (A load of an earlier generation, or a node whose load finished.)
  if tonumber(l[1] or '') ~= GEN or not ld or ld >= tonumber(l[3]) then ack(); return 'dup' end
  if tonumber(l[3]) ~= n or (l[4] or '') ~= h then return 'changed' end
  if ld ~= from then return 'at:' .. ld end
end

local hop
if first then
  hop = A.hop
  -- The number of items of the earlier generation (whose items done with
  -- the same value are kept), for the chunks to come.
  local pn = redis.call('HGET', ITEMS, x .. '|n') or '0'
  if overstate(A.size or 0) then return 'state' end
  addop(op)
  addbytes(A.size or 0)
  redis.call('HSET', STATE, x, 'running')
  redis.call('HSET', ITEMS, x .. '|n', n, x .. '|pn', pn, x .. '|next', 0, x .. '|done', 0, x .. '|kept', 0,
    x .. '|hop', tostring(hop), x .. '|nt', 0, x .. '|lg', GEN, x .. '|ld', 0, x .. '|h', h)
  redis.call('HDEL', ITEMS, x .. '|failed')
else
  hop = tonumber(redis.call('HGET', ITEMS, x .. '|hop'))
end
local s = redis.call('HMGET', ITEMS, x .. '|pn', x .. '|next', x .. '|done', x .. '|kept', x .. '|nt')
local pn, nxt, done, kept, nt = tonumber(s[1]), tonumber(s[2]), tonumber(s[3]), tonumber(s[4]), tonumber(s[5])

-- This chunk's items to run: all, except those done before with the same
-- value. They take the next positions (x|t|<p>, one field each, so that
-- itemdone finds the next one in O(1): a list in one field made a
-- for_each quadratic).
local k0 = kept
for j = 1, c do
  local i = from + j - 1
  local keep = false
  if pn == n and redis.call('HGET', ITEMS, x .. '|s|' .. i) == 'done' then
    keep = redis.call('HGET', ITEMS, x .. '|i|' .. i) == A.items[j]
  end
  if keep then
    kept = kept + 1
  else
    nt = nt + 1
    redis.call('HSET', ITEMS, x .. '|i|' .. i, A.items[j], x .. '|s|' .. i, 'waiting', x .. '|t|' .. nt, i)
  end
end
done = done + kept - k0
local ld = from + c
local last = ld == n
-- The first chunk's event consumes the exec token's unit when the load
-- ends with it; else the last chunk's does.
if first then
  event('node.expanded', last and -1 or 0, 'x', x, 'n', n, 'kept', kept)
else
  event('node.loaded', last and -1 or 0, 'x', x, 'from', from, 'count', c, 'kept', kept)
end
-- Queue while the window has room: at most parallel in flight (queued,
-- not yet done). Before this chunk either every loaded item was queued or
-- the window was full, so this queues at most this chunk's items.
while nxt < nt and (A.parallel <= 0 or nxt - (done - kept) < A.parallel) do
  nxt = nxt + 1
  local i = redis.call('HGET', ITEMS, x .. '|t|' .. nxt)
  redis.call('HSET', ITEMS, x .. '|s|' .. i, 'queued')
  redis.call('XADD', qstream(g.q), '*', 't', token('item', A.node, A.iter, hop, 1, i))
  event('item.queued', 1, 'x', x, 'i', i)
end
redis.call('HSET', ITEMS, x .. '|ld', ld, x .. '|nt', nt, x .. '|next', nxt, x .. '|done', done, x .. '|kept', kept)
if last and done == n then
  redis.call('XADD', qstream(g.q), '*', 't', token('fin', A.node, A.iter, hop, 1, -1))
  event('node.collect', 1, 'x', x)
end
if last then ack() end
settle()
return 'ok'
