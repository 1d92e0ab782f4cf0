-- advance: the common case of complete.lua, without its generality, for
-- speed. A node outside any loop, itself no loop and without compensate,
-- completed; each of its outgoing edges is a plain after edge, so each gets a
-- real token, to a successor outside any loop — a plain node, or a join
-- (all or any) whose arrivals are counted as complete.lua counts them. The
-- worker decides this from the graph. The script writes exactly what
-- complete.lua writes for such a node — state, output, events, join
-- arrivals, tokens, counter, and the end of the run when no work is left —
-- without lib.lua's prologue (only step.lua's), without JSON to decode, and
-- with fewer commands (one read and one write of the state hash, the run's
-- meta, joins and counter included; a second read when the run ends).
-- When the run is unknown, or the counter would go below zero, or the run
-- ends and has a deadline timer or keys this script is not given (run|aux:
-- below), it returns 'slow' before any write and the worker calls complete
-- instead.
-- KEYS: its own layout, the keys it uses: 1 state, 2 events, then for each
--       of the run's queues (in the order of the run's queues) its stream,
--       2+i. Until its last step a run needs no other key; at its end, the
--       keys' expiry must reach every key of the run, and a run that has an
--       applied, items or comp key (the general scripts that make one set
--       the state field run|aux) or a deadline timer ends through complete.
-- ARGV: 1 node, 2 output (JSON text), 3 hop of the executions it queues
--       (the token's hop + 1), 4 token gen, 5 now (ms), 6 index of the
--       message's queue in the run's queues (1-based), 7 message id, 8 run
--       id, 9 index of the control queue, 10 '1' when the workflow has
--       outputs (the graph's "_".outputs), 11 the run's max_state_bytes
--       (0: none; an output that would take run|bytes, the bytes of the
--       values the run stored, over it goes to complete, which refuses
--       it), then for each successor, in
--       the order of the node's edges: its id, the index of its queue,
--       its number of incoming edges if it is a join, negative for a join
--       any (else 0), and the state fields its token carries (its graph
--       field rd, comma-separated; '' for none: step.lua's carry); then,
--       optionally, the graph suffix the worker decided from and, only
--       after it, the run's result evaluated ahead (below).
-- Written for Redis's Lua, where every redis.call costs about 1 µs, a
-- table 0.15 µs, a call of a built-in function (tonumber, math.floor,
-- tostring) 0.1 to 0.3 µs and a number turned into a string 0.3 µs
-- (instruction counts: docs/performance.md): the run is read with one
-- HMGET of its state hash and written with one HSET, strings are passed
-- through as they came (ARGV, the hashes' fields), numbers are parsed
-- only where they are computed with or must be checked, and tables are
-- few and sized when made.
local A = ARGV
local STATE, EVENTS = KEYS[1], KEYS[2]
local node, out, nh, now, mid, run = A[1], A[2], A[3], A[5], A[7], A[8]
local na = #A
-- A last, extra argument is the graph suffix the worker decided the
-- successors from: a run patched since (patch.lua) takes complete, whose
-- header refuses a stale graph. After it may come the run's result,
-- evaluated ahead (runtime/ahead.go: the workflow's outputs read only
-- this node's output): used when this completion ends the run, instead of
-- a finish token; else ignored.
local gexp, ahead = nil, nil
if na > 11 and (na - 11) % 4 == 1 then
  gexp = A[na]; na = na - 1
elseif na > 12 and (na - 11) % 4 == 2 then
  gexp, ahead = A[na - 1], A[na]; na = na - 2
end
local n = (na - 11) / 4
-- The first queue is the usual one (a workflow of one queue): its index
-- needs no conversion (tonumber converts twice, with strtod).
local mqa = A[6]
local mq = mqa == '1' and 1 or tonumber(mqa)
local qmsg = mq and mq > 0 and mq % 1 == 0 and KEYS[2 + mq]
-- The control queue is most often the message's.
local ctl = A[9] == mqa and mq or tonumber(A[9])
local maxst = tonumber(A[11])
if na < 11 or (na - 11) % 4 ~= 0 or not qmsg or not ctl or ctl < 1 or ctl % 1 ~= 0 or not KEYS[2 + ctl] or not maxst then
  return redis.error_reply('ERR wfc: bad advance call')
end

-- One read of the state hash: the run's fields (r[1..5]: status, gen,
-- graph, max_hops, counter), the execution's state (r[6]), the bytes of
-- the values the run stored (r[7]: run|bytes, below), and for each
-- successor its state and, for a join, its arrival from this node, fired
-- marker and counts. r[j] is field f[j + 2] (f has the command and key in
-- front); the loops below walk r in the order this one lays the fields
-- out. The fields only the end of the run needs (retention, deadline,
-- aux) are read then, once per run: each field of a read costs about as
-- much as a few hundred Lua instructions (its reply becomes a Lua string
-- in a table).
local f = {'HMGET', STATE, 'run|status', 'run|gen', 'run|graph', 'run|max_hops', COUNTER, node, 'run|bytes',
  nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
local nf = 9
for i = 1, n do
  local id = A[8 + 4 * i]
  nf = nf + 1
  f[nf] = id
  if A[10 + 4 * i] ~= '0' then
    f[nf + 1] = id .. '|' .. node .. '|after'
    f[nf + 2] = id .. '|#f'
    f[nf + 3] = id .. '|#n'
    f[nf + 4] = id .. '|#r'
    nf = nf + 4
  end
end
-- The fields the successors' tokens carry (step.lua's carry), read with
-- the rest, after it: cf[i] lists successor i's, at[field] is a field's
-- index in r. The node's own output is the one this script writes.
-- A spec of one field (no comma) is its own list, without gmatch; and the
-- tables are made only when some successor carries fields.
local cf, at, own = nil, nil, 'out|' .. node
for i = 1, n do
  local spec = A[11 + 4 * i]
  if spec ~= '' then
    if not cf then cf = {nil, nil, nil, nil} end
    local list, k
    if string.find(spec, ',', 1, true) then
      list, k = {}, 0
      for fl in string.gmatch(spec, '[^,]+') do
        k = k + 1
        list[k] = fl
      end
    else
      list, k = {spec}, 1
    end
    for x = 1, k do
      local fl = list[x]
      if fl ~= own and not (at and at[fl]) then
        nf = nf + 1
        f[nf] = fl
        if at then at[fl] = nf - 2 else at = {[fl] = nf - 2} end
      end
    end
    cf[i] = list
  end
end
local r
if nf <= CHUNK + 2 then r = call(unpack(f, 1, nf)) else r = bigcall(f, nf) end
if not r[1] then return 'slow' end
-- The token's generation is checked against the run's (equal strings are
-- the common case, and need no conversion).
local gen, stale = r[2], false
if A[4] ~= gen then
  local tg = tonumber(A[4])
  if not tg then return redis.error_reply('ERR wfc: bad advance call') end
  stale = tg < tonumber(gen)
end
if r[1] ~= 'running' then call('XACK', qmsg, GROUP, mid); return 'inactive' end
if stale then call('XACK', qmsg, GROUP, mid); return 'stale' end
if gexp and r[3] ~= gexp then return 'slow' end
local cur = r[6]
if not cur or cur == 'completed' or cur == 'skipped' or cur == 'failed' or cur == 'cancelled' then
  call('XACK', qmsg, GROUP, mid)
  return 'dup'
end
-- The run's stored values (lib.lua's addbytes): past the bound, complete
-- refuses the output.
local used = (r[7] or 0) + #out
if maxst > 0 and used > maxst then return 'slow' end

-- What each successor's arrival does, and the counter's delta, as the
-- writes of one HSET (what complete.lua's HSET, HSETNX and HINCRBY calls
-- would write: the script is atomic), and the tokens to queue: toks holds
-- each one's stream and message. An argument is converted and checked
-- where it is used, before the first write.
local sets = {'HSET', STATE, node, 'completed', own, out, 'run|bytes', used .. '', nil, nil, nil, nil,
  nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
local ns, nexts, toks, dc, j = 8, {nil, nil}, {nil, nil, nil, nil}, -1, 7
local vals -- the values a token carries (carry), one table for all
local gs, mh = r[3] or '', r[4] or '0'
for i = 1, n do
  local id, fire = A[8 + 4 * i], true
  j = j + 1
  local js = A[10 + 4 * i]
  if js ~= '0' then
    -- A join: its number of incoming edges, negative for a join any.
    local nin = js == '2' and 2 or tonumber(js)
    if not nin or nin % 1 ~= 0 then return redis.error_reply('ERR wfc: bad advance call') end
    local any = nin < 0
    if any then nin = -nin end
    -- r[j + 1 .. j + 4]: arrival, fired, count, real.
    if r[j + 1] then
      fire = false
    else
      local count = (r[j + 3] or 0) + 1
      fire = not r[j + 2] and (any or count >= nin)
      sets[ns + 1] = f[j + 3]
      sets[ns + 2] = '1'
      sets[ns + 3] = f[j + 5]
      sets[ns + 4] = itos(count)
      sets[ns + 5] = f[j + 6]
      sets[ns + 6] = itos((r[j + 4] or 0) + 1)
      ns = ns + 6
      if fire then
        sets[ns + 1] = f[j + 4]
        sets[ns + 2] = '1'
        ns = ns + 2
      end
    end
  end
  if fire and not r[j] then
    -- The successor's queue is most often the message's.
    local qa, q = A[9 + 4 * i], qmsg
    if qa ~= mqa then
      q = tonumber(qa)
      q = q and q > 0 and q % 1 == 0 and KEYS[2 + q]
    end
    -- The hop is checked once, at the first execution it is written for.
    if not q or dc == -1 and not tonumber(nh) then return redis.error_reply('ERR wfc: bad advance call') end
    dc = dc + 1
    sets[ns + 1] = id
    sets[ns + 2] = 'queued'
    sets[ns + 3] = 'hop|' .. id
    sets[ns + 4] = nh
    ns = ns + 4
    nexts[dc + 1] = id .. ':' .. nh
    toks[2 * dc + 1] = q
    local o, list = nil, cf and cf[i]
    if list then
      local k = #list
      vals = vals or {nil, nil}
      for x = 1, k do
        local fl = list[x]
        if fl == own then vals[x] = out else vals[x] = r[at[fl]] end
      end
      o = carry(list, vals, k)
    end
    toks[2 * dc + 2] = tokenjson('exec', run, id, '', nh, '1', '-1', gen, gs, mh, o)
  end
  if js ~= '0' then j = j + 4 end
end
local c = (r[5] or 0) + dc
if c < 0 then return 'slow' end
-- At counter zero the run ends (lib.lua's settle): through a finish token
-- when it has outputs to evaluate (that token is one more unit), else at
-- once, its status written with the rest.
local outputs = A[10] == '1'
local ends = dc ~= 0 and c == 0
-- A run that has keys or a timer this script is not given ends through
-- complete (KEYS, above), or through a finish token.
-- (Read only when the run ends: the second read of the state hash.)
local plain, ret = false, nil
if ends then
  local e = call('HMGET', STATE, 'run|retention', 'run|deadline_ms', 'run|aux')
  local dl = e[2]
  plain, ret = not e[3] and not (dl and dl ~= '0' and dl + 0 > 0), e[1]
end
-- The result evaluated ahead ends the run here, as finish.lua would, when
-- it fits in the run's stored values (else the finish token fails the run).
local result = nil
if ends and outputs and ahead and plain and (maxst == 0 or used + #ahead <= maxst) then
  result, outputs = ahead, false
  sets[8] = (used + #ahead) .. ''
end
local finishing = ends and outputs
if ends and not outputs and not plain then return 'slow' end
if finishing then
  sets[ns + 1] = COUNTER
  sets[ns + 2] = '1'
  -- run|finishing: as lib.lua's settle (patch.lua refuses then).
  sets[ns + 3] = 'run|finishing'
  sets[ns + 4] = gen
  ns = ns + 4
elseif dc ~= 0 then
  sets[ns + 1] = COUNTER
  sets[ns + 2] = itos(c)
  ns = ns + 2
end
if ends and not outputs then
  sets[ns + 1] = 'run|status'
  sets[ns + 2] = 'completed'
  sets[ns + 3] = 'run|ended'
  sets[ns + 4] = now
  ns = ns + 4
  if result then
    sets[ns + 1] = 'run|result'
    sets[ns + 2] = result
    ns = ns + 2
  end
end

-- Writes, in complete.lua's order. One event: the executions it queues are
-- in its field next, with their hop (complete.lua folds them the same way).
if ns <= CHUNK + 2 then call(unpack(sets, 1, ns)) else bigcall(sets, ns) end
-- The event, as stepevent writes it (dc when not 0, next when it queued
-- any), with its arguments in the call rather than in a table to unpack.
if dc == -1 then
  call('XADD', EVENTS, '*', 'type', 'node.completed', 'ts', now, 'x', node, 'output', out, 'dc', '-1')
elseif dc == 0 then
  call('XADD', EVENTS, '*', 'type', 'node.completed', 'ts', now, 'x', node, 'output', out, 'next', nexts[1])
else
  call('XADD', EVENTS, '*', 'type', 'node.completed', 'ts', now, 'x', node, 'output', out, 'dc', itos(dc), 'next',
    joinlist(nexts, dc + 1))
end
for i = 1, 2 * dc + 1, 2 do
  call('XADD', toks[i], '*', 't', toks[i + 1])
end
call('XACK', qmsg, GROUP, mid)
if finishing then
  call('XADD', KEYS[2 + ctl], '*', 't', tokenjson('finish', run, '', '', '0', '1', '-1', gen, gs, mh))
  -- The run's events as stepevent writes them (the finish token is one
  -- unit: dc 1), with their arguments in the call.
  call('XADD', EVENTS, '*', 'type', 'run.finishing', 'ts', now, 'dc', '1')
elseif ends then
  if result then
    call('XADD', EVENTS, '*', 'type', 'run.completed', 'ts', now, 'result', result)
  else
    call('XADD', EVENTS, '*', 'type', 'run.completed', 'ts', now)
  end
  if ret and ret ~= '0' and ret + 0 > 0 then
    call('PEXPIRE', STATE, ret)
    call('PEXPIRE', EVENTS, ret)
  end
end
return 'ok'
