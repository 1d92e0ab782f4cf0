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
-- WIDE: a value longer than Redis's hash-max-listpack-value (64 by default).
local WIDE = string.rep('-', 80)
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

-- The node's items fields are written with one HSET at the end (sets),
-- whatever the chunk's size: a command per item and field (three an
-- item, read back to queue it) cost more than the rest of the call.
local sets, ns = {'HSET', ITEMS}, 2
local function set(f, v)
  sets[ns + 1], sets[ns + 2] = f, v
  ns = ns + 2
  return ns
end
local hop, pn, nxt, done, kept, nt
if first then
  hop = A.hop
  -- The number of items of the earlier generation (whose items done with
  -- the same value are kept), for the chunks to come.
  local pv = redis.call('HGET', ITEMS, x .. '|n') or '0'
  if overstate(A.size or 0) then return 'state' end
  addop(op)
  addbytes(A.size or 0)
  redis.call('HSET', STATE, x, 'running')
  redis.call('HDEL', ITEMS, x .. '|failed')
  set(x .. '|n', n)
  set(x .. '|pn', pv)
  set(x .. '|hop', tostring(hop))
  set(x .. '|lg', GEN)
  set(x .. '|h', h)
  -- A value longer than hash-max-listpack-value makes the items hash a
  -- hashtable, as run|graph does the state hash (step.lua): a for_each of
  -- 100 items has over 400 fields, under hash-max-listpack-entries (512
  -- by default), and in a listpack every field an item's read or
  -- completion names is a linear scan (itemnext's HMGET of 40 fields took
  -- 300 µs). Redis never turns a hashtable back into a listpack; the
  -- field goes again below, so the hash holds what it held.
  set(x .. '|wide', WIDE)
  pn, nxt, done, kept, nt = tonumber(pv), 0, 0, 0, 0
else
  local s = redis.call('HMGET', ITEMS, x .. '|hop', x .. '|pn', x .. '|next', x .. '|done', x .. '|kept', x .. '|nt')
  hop, pn, nxt, done, kept, nt = tonumber(s[1]), tonumber(s[2]), tonumber(s[3]), tonumber(s[4]), tonumber(s[5]), tonumber(s[6])
end

-- This chunk's items to run: all, except those done before with the same
-- value. They take the next positions (x|t|<p>, one field each, so that
-- itemdone finds the next one in O(1): a list in one field made a
-- for_each quadratic). at[p] is the item at position p of this chunk,
-- sv[p] where its state's value is in sets.
local prev = nil
if pn == n then
  local f = {'HMGET', ITEMS}
  for j = 1, c do
    local i = from + j - 1
    f[2 * j + 1], f[2 * j + 2] = x .. '|s|' .. i, x .. '|i|' .. i
  end
  prev = redis.call(unpack(f, 1, 2 * c + 2))
end
local k0, at, sv = kept, {}, {}
for j = 1, c do
  local i = from + j - 1
  if prev and prev[2 * j - 1] == 'done' and prev[2 * j] == A.items[j] then
    kept = kept + 1
  else
    nt = nt + 1
    at[nt] = i
    set(x .. '|i|' .. i, A.items[j])
    sv[nt] = set(x .. '|s|' .. i, 'waiting')
    set(x .. '|t|' .. nt, i)
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
-- the window was full, so this queues at most this chunk's items (read
-- from Redis otherwise, should that change).
-- Each item's event is event('item.queued', 1, 'x', x, 'i', i) written
-- as writeevent writes it, without its two tables an event: a hundred
-- items' events took 400 µs through it, 215 so.
local q = qstream(g.q)
while nxt < nt and (A.parallel <= 0 or nxt - (done - kept) < A.parallel) do
  nxt = nxt + 1
  local i = at[nxt]
  if i then
    sets[sv[nxt]] = 'queued'
  else
    i = redis.call('HGET', ITEMS, x .. '|t|' .. nxt)
    set(x .. '|s|' .. i, 'queued')
  end
  call('XADD', q, '*', 't', token('item', A.node, A.iter, hop, 1, i))
  DC = DC + 1
  call('XADD', EVENTS, '*', 'type', 'item.queued', 'ts', NOW, 'x', x, 'i', tostring(i), 'dc', '1')
end
set(x .. '|ld', ld)
set(x .. '|nt', nt)
set(x .. '|next', nxt)
set(x .. '|done', done)
set(x .. '|kept', kept)
bigcall(sets, ns)
if first then redis.call('HDEL', ITEMS, x .. '|wide') end
if last and done == n then
  redis.call('XADD', qstream(g.q), '*', 't', token('fin', A.node, A.iter, hop, 1, -1))
  event('node.collect', 1, 'x', x)
end
if last then ack() end
settle()
return 'ok'
