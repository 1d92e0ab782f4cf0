-- advance: the common case of complete.lua, without its generality, for
-- speed. A node outside any loop, itself no loop and without compensate,
-- completed; each of its outgoing edges is a plain after edge, so each gets a
-- real token, to a successor outside any loop — a plain node, or a join
-- (all or any) whose arrivals are counted as complete.lua counts them. The
-- worker decides this from the graph. The script writes exactly what
-- complete.lua writes for such a node — state, output, events, join
-- arrivals, tokens, counter, and the end of the run when no work is left —
-- without lib.lua's prologue (only step.lua's) and without JSON to decode, and with fewer
-- commands (one read and one write of the state hash, and of each join's
-- fields). When the run is unknown, or the counter
-- would go below zero, it returns 'slow' before any write and the worker
-- calls complete instead.
-- KEYS: as for the run scripts (lib.lua).
-- ARGV: 1 node, 2 output (JSON text), 3 hop, 4 token gen, 5 now (ms),
--       6 group, 7 index of the message's queue in the run's queues (1-based),
--       8 message id, 9 run id, 10 index of the control queue, 11 '1' when the
--       workflow has outputs (the graph's "_".outputs), then for each
--       successor, in the order of the node's edges: its id, the index of its
--       queue, its number of incoming edges when it is a join (else 0), and
--       its join mode ('all', 'any').
local META, STATE, CTX, JOINS, EVENTS = KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local node, out, now, group, mid, run = ARGV[1], ARGV[2], ARGV[5], ARGV[6], ARGV[8], ARGV[9]
local hop, gen, mq, ctl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[7]), tonumber(ARGV[10])
local outputs = ARGV[11] == '1'
local n = (#ARGV - 11) / 4
if n ~= math.floor(n) or not mq or not KEYS[8 + 2 * mq] or not ctl or not KEYS[9 + 2 * ctl] then
  return redis.error_reply('ERR wfc: bad advance call')
end

local m = redis.call('HMGET', META, 'status', 'gen', 'counter', 'retention', 'graph', 'max_hops', 'deadline_ms')
if not m[1] then return 'slow' end
local GEN = tonumber(m[2])
local function ack() redis.call('XACK', KEYS[8 + 2 * mq], group, mid) end
if m[1] ~= 'running' then ack(); return 'inactive' end
if gen < GEN then ack(); return 'stale' end
-- The execution's state and whether each successor has one, in one read.
local fields = {'HMGET', STATE, node}
for i = 1, n do fields[i + 3] = ARGV[11 + 4 * (i - 1) + 1] end
local sts = redis.call(unpack(fields))
local cur = sts[1]
if not cur or cur == 'completed' or cur == 'skipped' or cur == 'failed' then ack(); return 'dup' end

-- Reads: what each successor's arrival will do, and the counter's delta.
-- A join's arrival, fired marker and counts come in one read, and are
-- written in one (the script is atomic: what complete.lua's HSETNX and
-- HINCRBY calls would write).
local succ, dc = {}, -1
for i = 1, n do
  local b = 11 + 4 * (i - 1)
  local s = {id = ARGV[b + 1], q = tonumber(ARGV[b + 2]), nin = tonumber(ARGV[b + 3]), mode = ARGV[b + 4]}
  if not s.q or not KEYS[8 + 2 * s.q] or not s.nin then return redis.error_reply('ERR wfc: bad advance call') end
  s.arrival = s.id .. '|' .. node .. '|after'
  s.fire = true
  if s.nin > 0 then
    local j = redis.call('HMGET', JOINS, s.arrival, s.id .. '|#f', s.id .. '|#n', s.id .. '|#r')
    if j[1] then
      s.fire, s.dup = false, true
    else
      s.count = tonumber(j[3] or '0') + 1
      s.real = tonumber(j[4] or '0') + 1
      s.fire = not j[2] and (s.mode == 'any' or s.count >= s.nin)
    end
  end
  s.queue = s.fire and not sts[i + 1]
  if s.queue then dc = dc + 1 end
  succ[i] = s
end
if tonumber(m[3] or '0') + dc < 0 then return 'slow' end

-- Writes, in complete.lua's order (the state hash's in one HSET).
local nh = tostring(hop + 1)
local sets = {'HSET', STATE, node, 'completed'}
for _, s in ipairs(succ) do
  if s.queue then
    sets[#sets + 1] = s.id
    sets[#sets + 1] = 'queued'
    sets[#sets + 1] = 'hop|' .. s.id
    sets[#sets + 1] = nh
  end
end
redis.call(unpack(sets))
redis.call('HSET', CTX, node, out)
-- One event: the executions it queues are in its field next, with their
-- hop (complete.lua folds them the same way).
local nexts = {}
for _, s in ipairs(succ) do
  if s.queue then nexts[#nexts + 1] = s.id .. ':' .. nh end
end
stepevent(EVENTS, 'node.completed', now, dc, {'x', node, 'output', out}, nexts)
for _, s in ipairs(succ) do
  if s.nin > 0 and not s.dup then
    local js = {'HSET', JOINS, s.arrival, '1', s.id .. '|#n', s.count, s.id .. '|#r', s.real}
    if s.fire then
      js[#js + 1] = s.id .. '|#f'
      js[#js + 1] = '1'
    end
    redis.call(unpack(js))
  end
  if s.queue then
    redis.call('XADD', KEYS[8 + 2 * s.q], '*', 't',
      tokenjson('exec', run, s.id, '', nh, 1, -1, GEN, m[5] or '', tonumber(m[6] or '0') or 0))
  end
end
ack()
-- lib.lua's settle: at counter zero the run ends, through a finish token
-- when it has outputs to evaluate.
if dc ~= 0 and redis.call('HINCRBY', META, 'counter', dc) == 0 then
  if outputs then
    redis.call('XADD', KEYS[8 + 2 * ctl], '*', 't', tokenjson('finish', run, '', '', 0, 1, -1, GEN))
    stepevent(EVENTS, 'run.finishing', now, 1, {})
    redis.call('HINCRBY', META, 'counter', 1)
  else
    redis.call('HSET', META, 'status', 'completed', 'ended', now)
    -- A deadline timer exists only for a run with a deadline.
    if (tonumber(m[7] or '0') or 0) > 0 then
      redis.call('ZREM', KEYS[9 + 2 * ctl], '{"kind":"deadline","run":"' .. run .. '","gen":' .. tostring(GEN) .. '}')
    end
    stepevent(EVENTS, 'run.completed', now, 0, {})
    local ret = tonumber(m[4] or '0') or 0
    if ret > 0 then
      for _, k in ipairs({KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}) do
        redis.call('PEXPIRE', k, ret)
      end
      -- applied, items and comp exist only for runs that took other
      -- scripts: one EXISTS saves three calls for the others.
      if redis.call('EXISTS', KEYS[2], KEYS[8], KEYS[9]) > 0 then
        for _, k in ipairs({KEYS[2], KEYS[8], KEYS[9]}) do
          redis.call('PEXPIRE', k, ret)
        end
      end
    end
  end
end
return 'ok'
