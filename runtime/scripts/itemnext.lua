-- itemnext: the common case of itemdone.lua, without its generality, for
-- speed (as advance.lua is to complete.lua): for_each items whose handlers
-- succeeded (not error results under a tolerance), one or several items
-- of one for_each execution in a call — the items a worker completes
-- together (runtime/items.go). For each item it writes exactly what
-- itemdone writes for it — the operation key, the item's output and state,
-- the node's done count and next position, the next item's state and token
-- (or the collect token after the last item), the events, run|aux,
-- run|bytes and the counter — and replies what itemdone would, as if the
-- items came in that order, one call each; without lib.lua's prologue
-- (only step.lua's), without JSON to decode, and with one read and one
-- write of the state hash, the items hash and the applied keys for all
-- of them. It replies 'slow' for an item, writing nothing for it, when
-- its output does not fit max_state_bytes or the counter would reach zero
-- (the run would end: settle's work), and for all of them when the run is
-- unknown or its graph is not the one the worker decided from (a patch);
-- the worker then calls itemdone for each such item.
-- KEYS: its own layout, the keys it uses: 1 state, 2 events, 3 items,
--       4 applied, then for each of the run's queues (in the order of the
--       run's queues) its stream, 4+i.
-- ARGV: 1 node, 2 iter, 3 now (ms), 4 run id, 5 index of the node's queue
--       in the run's queues (1-based; graph field q: where the next item's
--       token and the collect token go), 6 the run's max_state_bytes
--       (0: none), 7 the graph suffix the worker decided from, 8 the
--       items, each "<item> <token gen> <message queue index> <message id>
--       <output length>\n<output>" (the item's index a decimal integer,
--       the output JSON text), concatenated.
-- Reply: a list, each item's status in order (ok, dup, stale, inactive,
-- slow). Every message of an item replied to but slow is acknowledged.
-- Written for Redis's Lua as advance.lua is (its header says the costs):
-- strings pass through as they came, numbers are parsed only where they
-- are computed with or checked, and there is one command of each kind.
local A = ARGV
local STATE, EVENTS, ITEMS, APPLIED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local node, iter, now, run, gexp, packed = A[1], A[2], A[3], A[4], A[7], A[8]
local nq, maxst = tonumber(A[5]), tonumber(A[6])
local qnode = nq and nq > 0 and nq % 1 == 0 and KEYS[4 + nq]
local function bad() return redis.error_reply('ERR wfc: bad itemnext call') end
if #A ~= 8 or not qnode or not maxst or not APPLIED then return bad() end

-- The items: its[i], gens[i], qs[i] (the message's stream), mids[i],
-- outs[i]. The item's index is written into field names and events as
-- given: only its canonical form names the fields itemdone would write.
local its, gens, qs, mids, outs, k, pos, len = {}, {}, {}, {}, {}, 0, 1, #packed
while pos <= len do
  local s, e, it, tg, mq, mid, ol = string.find(packed, '^(%d+) (%-?%d+) (%d+) (%S+) (%d+)\n', pos)
  if s ~= pos then return bad() end
  mq, ol = tonumber(mq), tonumber(ol)
  local q = mq > 0 and KEYS[4 + mq]
  if not q or #it > 15 or (#it > 1 and string.sub(it, 1, 1) == '0') or e + ol > len then return bad() end
  k = k + 1
  its[k], gens[k], qs[k], mids[k], outs[k] = it, tg, q, mid, string.sub(packed, e + 1, e + ol)
  pos = e + ol + 1
end
if k == 0 then return bad() end
local x = node
if iter ~= '' then x = node .. '@' .. iter end

local reply, acks = {}, {}
-- ack: item i's message is acknowledged (at the end, one XACK a stream).
local function ack(i)
  local l = acks[qs[i]]
  if not l then
    l = {'XACK', qs[i], GROUP}
    acks[qs[i]] = l
  end
  l[#l + 1] = mids[i]
end
local function acknowledge()
  for _, l in pairs(acks) do call(unpack(l)) end
end

-- The run: status, generation, graph, counter, bytes stored, and the
-- for_each execution's state.
local r = call('HMGET', STATE, 'run|status', 'run|gen', 'run|graph', COUNTER, 'run|bytes', x)
if not r[1] or not r[2] or r[3] ~= gexp then
  for i = 1, k do reply[i] = 'slow' end
  return reply
end
local gen = r[2]
local g = tonumber(gen)
-- The items still to decide (cand), with their operation keys.
local cand, ops, nc = {}, {'SMISMEMBER', APPLIED}, 0
for i = 1, k do
  if r[1] ~= 'running' then
    reply[i] = 'inactive'
    ack(i)
  elseif gens[i] ~= gen and tonumber(gens[i]) < g then
    reply[i] = 'stale'
    ack(i)
  elseif r[6] ~= 'running' then
    reply[i] = 'dup'
    ack(i)
  else
    nc = nc + 1
    cand[nc] = i
    ops[nc + 2] = 'i:' .. x .. ':' .. its[i] .. ':' .. gen
  end
end
if nc == 0 then
  acknowledge()
  return reply
end
local applied = call(unpack(ops, 1, nc + 2))
-- The node's items: count, next position, hop, positions to run, done
-- count, then each candidate's state and the items of the next positions
-- (at most one a candidate).
local f = {'HMGET', ITEMS, x .. '|n', x .. '|next', x .. '|hop', x .. '|nt', x .. '|done'}
for j = 1, nc do f[7 + j] = x .. '|s|' .. its[cand[j]] end
local it = call(unpack(f))
local n, nxt, hop, nt = tonumber(it[1]), tonumber(it[2]), it[3], tonumber(it[4] or '0')
local ts = {}
if n and nxt and hop and nxt < nt then
  local tf, m = {'HMGET', ITEMS}, math.min(nc, nt - nxt)
  for j = 1, m do tf[2 + j] = x .. '|t|' .. itos(nxt + j) end
  ts = call(unpack(tf, 1, m + 2))
end

-- Each candidate in order, as one call each would: st holds the items'
-- states as this call leaves them.
local st = {}
for j = 1, nc do st[its[cand[j]]] = it[5 + j] end
local done, used, c, nx = tonumber(it[5] or '0'), tonumber(r[5] or '0'), tonumber(r[4] or '0'), 0
local sets = {'HSET', ITEMS}
-- The recorded items in order (oks, their candidates' indices), the
-- item each queued (nis, false if none) and which was the last (lastat):
-- their events and tokens are written at the end, each XADD called
-- directly (a table an event, unpacked, cost about a microsecond more).
local ns, adds, na, oks, nis, no, lastat = 2, {'SADD', APPLIED}, 2, {}, {}, 0, 0
local firstnext = nxt
for j = 1, nc do
  local i = cand[j]
  local item, out = its[i], outs[i]
  local s = st[item]
  if applied[j] == 1 or not n or (s ~= 'queued' and s ~= 'retrying') then
    reply[i] = 'dup'
    ack(i)
  elseif not nxt or not hop or maxst > 0 and used + #out > maxst then
    reply[i] = 'slow'
  else
    local ni = nil
    if nxt < nt then ni = ts[nxt - firstnext + 1] end
    local last = done + 1 == n
    local dc = -1
    if ni then dc = dc + 1 end
    if last then dc = dc + 1 end
    if c + dc <= 0 or nxt < nt and not ni then
      reply[i] = 'slow'
    else
      reply[i] = 'ok'
      ack(i)
      c, used, done = c + dc, used + #out, done + 1
      na = na + 1
      adds[na] = ops[j + 2]
      st[item] = 'done'
      sets[ns + 1], sets[ns + 2], sets[ns + 3], sets[ns + 4] = x .. '|o|' .. item, out, x .. '|s|' .. item, 'done'
      ns = ns + 4
      no = no + 1
      oks[no], nis[no] = i, ni or false
      if ni then
        nxt = nxt + 1
        st[ni] = 'queued'
        sets[ns + 1], sets[ns + 2] = x .. '|s|' .. ni, 'queued'
        ns = ns + 2
      end
      if last then lastat = no end
    end
  end
end

-- Writes: itemdone's, its HINCRBYs as the values they make, and the
-- events and tokens in the order the items' calls would have written
-- them.
if na > 2 then
  call(unpack(adds, 1, na))
  call('HSET', STATE, 'run|aux', '1', 'run|bytes', tostring(used), COUNTER, tostring(c))
  sets[ns + 1], sets[ns + 2] = x .. '|done', tostring(done)
  ns = ns + 2
  if nxt ~= firstnext then
    sets[ns + 1], sets[ns + 2] = x .. '|next', tostring(nxt)
    ns = ns + 2
  end
  bigcall(sets, ns)
  for o = 1, no do
    local i, ni = oks[o], nis[o]
    call('XADD', EVENTS, '*', 'type', 'item.completed', 'ts', now, 'x', x, 'i', its[i], 'output', outs[i], 'dc', '-1')
    if ni then
      call('XADD', qnode, '*', 't', tokenjson('item', run, node, iter, hop, '1', ni, gen))
      call('XADD', EVENTS, '*', 'type', 'item.queued', 'ts', now, 'x', x, 'i', ni, 'dc', '1')
    end
    if o == lastat then
      call('XADD', qnode, '*', 't', tokenjson('fin', run, node, iter, hop, '1', '-1', gen))
      call('XADD', EVENTS, '*', 'type', 'node.collect', 'ts', now, 'x', x, 'dc', '1')
    end
  end
end
acknowledge()
return reply
