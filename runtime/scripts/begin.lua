-- begin: the common case of start.lua, without its generality, for speed
-- (as advance.lua is to complete.lua): every entry node is outside any loop.
-- The submitter decides this from the plan. The script writes exactly what
-- start.lua writes — the run's own fields, its run.started event (with the
-- entries it queued), a state and a token per entry, the deadline timer, the counter
-- — without lib.lua's prologue (only step.lua's) and without JSON to decode. When the graph
-- is not stored it returns 'slow' before any write and the submitter calls
-- start, which says why.
-- KEYS: its own layout, the keys it uses (as advance has its own): 1 state,
--       2 events, 3 graph, 4 the control queue's timers (the deadline
--       timer), 5 the shard's admission hash, then for each of the run's
--       queues (in the order of the run's queues) its stream, 4+2i, and its
--       entry stream, 5+2i.
-- ARGV: 1 run id, 2 now (ms), 3 IR hash, 4 graph suffix, 5 queues (comma-
--       separated), 6 workflow, 7 inputs (JSON text), 8 deadline_ms,
--       9 deadline_at (ms), 10 max_hops, 11 max_fanout, 12 retention (ms),
--       then for each entry node: its id and the index of its queue
--       (1-based, in the run's queues).
local A = ARGV
local STATE, EVENTS, GRAPH, CTLTIMERS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local run, now = A[1], A[2]
local na = #A
local n = (na - 12) / 2
-- Numbers it writes or computes with are checked here, before any write: a
-- script that errors half-way keeps its writes.
-- (tonumber converts twice, with strtod: the usual values skip it.)
local dlms = A[8] == '0' and 0 or tonumber(A[8])
if n < 1 or (na - 12) % 2 ~= 0 or not tonumber(A[10]) or not dlms or dlms > 0 and not tonumber(A[9])
    or not CTLTIMERS then
  return redis.error_reply('ERR wfc: bad begin call')
end
-- Each entry's queue (qs[i], its stream KEYS[4+2q]), checked before any
-- write; an entry named twice is a bad call too.
local ADMIT = KEYS[5]
local names -- the run's queues, the admission hash's fields
if A[5] ~= '' and not string.find(A[5], ',', 1, true) then
  names = {A[5]} -- one queue (gmatch makes a closure and a capture per name)
else
  names = {}
  for name in string.gmatch(A[5], '[^,]+') do names[#names + 1] = name end
end
local qs, seen = {nil}, n > 1 and {} or nil
for i = 1, n do
  local id, qa = A[11 + 2 * i], A[12 + 2 * i]
  local q = qa == '1' and 1 or tonumber(qa)
  qs[i] = q and q > 0 and q % 1 == 0 and KEYS[5 + 2 * q] and names[q] and q
  if not qs[i] or not ADMIT then return redis.error_reply('ERR wfc: bad begin call') end
  if seen then
    if seen[id] then return redis.error_reply('ERR wfc: bad begin call') end
    seen[id] = true
  end
end

if call('HEXISTS', STATE, 'run|status') == 1 then return 'exists' end
if call('HEXISTS', GRAPH, '_') == 0 then return 'slow' end

-- Writes: what start.lua writes, the state hash's in one HSET (run|graph
-- first, as in start.lua: step.lua says why), the counter at once, not
-- added after. The run is new, so none of its entries has a state yet.
local sets = {'HSET', STATE, 'run|graph', A[4], 'run|status', 'running', 'run|gen', '0', 'run|ir', A[3],
  'run|queues', A[5], 'run|workflow', A[6], 'run|inputs', A[7], 'run|created', now,
  'run|deadline_ms', A[8], 'run|max_hops', A[10], 'run|max_fanout', A[11], 'run|retention', A[12],
  COUNTER, itos(n), nil, nil, nil, nil}
local ns, nexts = 28, {nil}
for i = 1, n do
  local id = A[11 + 2 * i]
  sets[ns + 1] = id
  sets[ns + 2] = 'queued'
  sets[ns + 3] = 'hop|' .. id
  sets[ns + 4] = '1'
  ns = ns + 4
  nexts[i] = id .. ':1'
end
if ns <= CHUNK + 2 then call(unpack(sets, 1, ns)) else bigcall(sets, ns) end
-- A new run waits for admission: its entry tokens go to their queues'
-- entry streams, which workers take from when the work of runs in flight
-- is drained (take.lua), or straight to the queue's stream while an idle
-- worker's credits last (docs/runtime.md, "Scheduling").
for i = 1, n do
  local q, to = qs[i], KEYS[5 + 2 * qs[i]]
  local c = tonumber(call('HGET', ADMIT, names[q]) or '0')
  if c and c > 0 then
    call('HINCRBY', ADMIT, names[q], -1)
    to = KEYS[4 + 2 * q]
  end
  call('XADD', to, '*', 't', tokenjson('exec', run, A[11 + 2 * i], '', '1', '1', '-1', '0', A[4], A[10]))
end
-- One event: the entries it queued are in its field next (start.lua folds
-- them the same way).
-- As stepevent writes it (n > 0: dc and next), with its arguments in the
-- call rather than in a table to unpack.
call('XADD', EVENTS, '*', 'type', 'run.started', 'ts', now, 'ir', A[3], 'workflow', A[6], 'inputs', A[7],
  'dc', itos(n), 'next', n == 1 and nexts[1] or joinlist(nexts, n))
if dlms > 0 then
  call('ZADD', CTLTIMERS, A[9], deadlinejson(run, '0'))
end
return 'ok'
