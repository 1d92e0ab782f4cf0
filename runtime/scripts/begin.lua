-- begin: the common case of start.lua, without its generality, for speed
-- (as advance.lua is to complete.lua): every entry node is outside any loop.
-- The submitter decides this from the plan. The script writes exactly what
-- start.lua writes — the run's own fields, its run.started event (with the
-- entries it queued), a state and a token per entry, the deadline timer, the counter
-- — without lib.lua's prologue (only step.lua's) and without JSON to decode. When the graph
-- is not stored it returns 'slow' before any write and the submitter calls
-- start, which says why.
-- KEYS: as for the run scripts (lib.lua).
-- ARGV: 1 run id, 2 now (ms), 3 IR hash, 4 graph suffix, 5 queues (comma-
--       separated), 6 workflow, 7 inputs (JSON text), 8 deadline_ms,
--       9 deadline_at (ms), 10 max_hops, 11 max_fanout, 12 retention (ms),
--       13 index of the control queue, then for each entry node: its id
--       and the index of its queue (1-based, in the run's queues).
local STATE, EVENTS, GRAPH = KEYS[1], KEYS[3], KEYS[4]
local run, now = ARGV[1], ARGV[2]
local ctl = tonumber(ARGV[13])
local n = (#ARGV - 13) / 2
if n < 1 or n ~= math.floor(n) or not tonumber(ARGV[10]) or not ctl or not KEYS[6 + 2 * ctl] then
  return redis.error_reply('ERR wfc: bad begin call')
end
local entries, seen = {}, {}
for i = 1, n do
  local e = {id = ARGV[12 + 2 * i], q = tonumber(ARGV[13 + 2 * i])}
  if not e.q or not KEYS[5 + 2 * e.q] or seen[e.id] then return redis.error_reply('ERR wfc: bad begin call') end
  seen[e.id] = true
  entries[i] = e
end

if redis.call('HEXISTS', STATE, 'run|status') == 1 then return 'exists' end
if redis.call('HEXISTS', GRAPH, '_') == 0 then return 'slow' end

-- Writes: what start.lua writes, the state hash's in one HSET (run|graph
-- first, as in start.lua: step.lua says why), the counter at once, not
-- added after. The run is new, so none of its entries has a state yet.
local sets = {'HSET', STATE, 'run|graph', ARGV[4], 'run|status', 'running', 'run|gen', '0', 'run|ir', ARGV[3],
  'run|queues', ARGV[5], 'run|workflow', ARGV[6], 'run|inputs', ARGV[7], 'run|created', now,
  'run|deadline_ms', ARGV[8], 'run|max_hops', ARGV[10], 'run|max_fanout', ARGV[11], 'run|retention', ARGV[12],
  COUNTER, itos(n)}
local nexts = {}
for i, e in ipairs(entries) do
  sets[#sets + 1] = e.id
  sets[#sets + 1] = 'queued'
  sets[#sets + 1] = 'hop|' .. e.id
  sets[#sets + 1] = '1'
  nexts[i] = e.id .. ':1'
end
redis.call(unpack(sets))
for _, e in ipairs(entries) do
  redis.call('XADD', KEYS[5 + 2 * e.q], '*', 't',
    tokenjson('exec', run, e.id, '', '1', '1', '-1', '0', ARGV[4], ARGV[10]))
end
-- One event: the entries it queued are in its field next (start.lua folds
-- them the same way).
stepevent(EVENTS, 'run.started', now, n, {'ir', ARGV[3], 'workflow', ARGV[6], 'inputs', ARGV[7]}, nexts)
if tonumber(ARGV[8]) > 0 then
  redis.call('ZADD', KEYS[6 + 2 * ctl], ARGV[9], deadlinejson(run, '0'))
end
return 'ok'
