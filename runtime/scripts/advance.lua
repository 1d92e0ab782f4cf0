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
-- meta, joins and counter included). When the run is unknown, or the
-- counter would go below zero, it returns 'slow' before any write and the worker
-- calls complete instead.
-- KEYS: as for the run scripts (lib.lua).
-- ARGV: 1 node, 2 output (JSON text), 3 hop of the executions it queues
--       (the token's hop + 1), 4 token gen, 5 now (ms), 6 group, 7 index
--       of the message's queue in the run's queues (1-based), 8 message id,
--       9 run id, 10 index of the control queue, 11 '1' when the workflow
--       has outputs (the graph's "_".outputs), then for each successor, in
--       the order of the node's edges: its id, the index of its queue, its
--       number of incoming edges when it is a join (else 0), and its join
--       mode ('all', 'any').
-- Written for Redis's Lua, where every redis.call costs about 1 µs, a table
-- 0.15 µs and a number turned into a string 0.3 µs: the run is read with
-- one HMGET of its state hash and written with one HSET, strings
-- are passed through as they came (ARGV, the hashes' fields), and tables
-- are few.
local STATE, APPLIED, EVENTS, ITEMS, COMP = KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6]
local node, out, nh, now, group, mid, run = ARGV[1], ARGV[2], ARGV[3], ARGV[5], ARGV[6], ARGV[8], ARGV[9]
local gen, mq, ctl = tonumber(ARGV[4]), tonumber(ARGV[7]), tonumber(ARGV[10])
local outputs = ARGV[11] == '1'
local n = (#ARGV - 11) / 4
if n ~= math.floor(n) or not tonumber(nh) or not gen or not mq or not KEYS[5 + 2 * mq] or not ctl or not KEYS[6 + 2 * ctl] then
  return redis.error_reply('ERR wfc: bad advance call')
end
local qmsg = KEYS[5 + 2 * mq]

-- One read of the state hash: the run's fields (r[1..7]: status, gen,
-- graph, max_hops, retention, deadline_ms, counter), the execution's state
-- (r[8]), and for each successor whether it has a state and, for a join,
-- its arrival from this node, fired marker and counts. Successor i's
-- arguments are ARGV[8 + 4i .. 11 + 4i]; its state is r[at[i]], a join's
-- fields follow it (r[j] is field f[j + 2]: f has the command and key in
-- front).
local f = {'HMGET', STATE, 'run|status', 'run|gen', 'run|graph', 'run|max_hops', 'run|retention', 'run|deadline_ms',
  COUNTER, node}
local nf, at = 10, {}
for i = 1, n do
  local id = ARGV[8 + 4 * i]
  nf = nf + 1
  f[nf] = id
  at[i] = nf - 2
  if ARGV[10 + 4 * i] ~= '0' then
    f[nf + 1] = id .. '|' .. node .. '|after'
    f[nf + 2] = id .. '|#f'
    f[nf + 3] = id .. '|#n'
    f[nf + 4] = id .. '|#r'
    nf = nf + 4
  end
end
local r = redis.call(unpack(f, 1, nf))
if not r[1] then return 'slow' end
if r[1] ~= 'running' then redis.call('XACK', qmsg, group, mid); return 'inactive' end
-- (Equal strings are the common case, and need no conversion.)
if ARGV[4] ~= r[2] and gen < tonumber(r[2]) then redis.call('XACK', qmsg, group, mid); return 'stale' end
local cur = r[8]
if not cur or cur == 'completed' or cur == 'skipped' or cur == 'failed' then
  redis.call('XACK', qmsg, group, mid)
  return 'dup'
end

-- What each successor's arrival does, and the counter's delta, as the
-- writes of one HSET (what complete.lua's HSET, HSETNX and HINCRBY calls
-- would write: the script is atomic). queue[i] is the stream of successor
-- i when it gets a token. An argument is converted and checked where it
-- is used, before the first write.
local sets, ns, nexts, queue, dc = {'HSET', STATE, node, 'completed', 'out|' .. node, out}, 6, {}, {}, -1
for i = 1, n do
  local id, j, fire = ARGV[8 + 4 * i], at[i], true
  if ARGV[10 + 4 * i] ~= '0' then
    local nin = tonumber(ARGV[10 + 4 * i])
    if not nin or nin < 0 then return redis.error_reply('ERR wfc: bad advance call') end
    -- r[j + 1 .. j + 4]: arrival, fired, count, real.
    if r[j + 1] then
      fire = false
    else
      local count = tonumber(r[j + 3] or '0') + 1
      fire = not r[j + 2] and (ARGV[11 + 4 * i] == 'any' or count >= nin)
      sets[ns + 1] = f[j + 3]
      sets[ns + 2] = '1'
      sets[ns + 3] = f[j + 5]
      sets[ns + 4] = itos(count)
      sets[ns + 5] = f[j + 6]
      sets[ns + 6] = itos(tonumber(r[j + 4] or '0') + 1)
      ns = ns + 6
      if fire then
        sets[ns + 1] = f[j + 4]
        sets[ns + 2] = '1'
        ns = ns + 2
      end
    end
  end
  if fire and not r[j] then
    local q = tonumber(ARGV[9 + 4 * i])
    queue[i] = q and KEYS[5 + 2 * q]
    if not queue[i] then return redis.error_reply('ERR wfc: bad advance call') end
    dc = dc + 1
    sets[ns + 1] = id
    sets[ns + 2] = 'queued'
    sets[ns + 3] = 'hop|' .. id
    sets[ns + 4] = nh
    ns = ns + 4
    nexts[dc + 1] = id .. ':' .. nh
  end
end
local c = tonumber(r[7] or '0') + dc
if c < 0 then return 'slow' end
-- At counter zero the run ends (lib.lua's settle): through a finish token
-- when it has outputs to evaluate (that token is one more unit), else at
-- once, its status written with the rest.
local ends = dc ~= 0 and c == 0
local finishing = ends and outputs
if finishing then
  sets[ns + 1] = COUNTER
  sets[ns + 2] = '1'
  ns = ns + 2
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
end

-- Writes, in complete.lua's order. One event: the executions it queues are
-- in its field next, with their hop (complete.lua folds them the same way).
redis.call(unpack(sets, 1, ns))
stepevent(EVENTS, 'node.completed', now, dc, {'x', node, 'output', out}, nexts)
local gs, mh = r[3] or '', r[4] or '0'
for i = 1, n do
  if queue[i] then
    redis.call('XADD', queue[i], '*', 't', tokenjson('exec', run, ARGV[8 + 4 * i], '', nh, '1', '-1', r[2], gs, mh))
  end
end
redis.call('XACK', qmsg, group, mid)
if finishing then
  redis.call('XADD', KEYS[5 + 2 * ctl], '*', 't', tokenjson('finish', run, '', '', '0', '1', '-1', r[2]))
  stepevent(EVENTS, 'run.finishing', now, 1, {})
elseif ends then
  -- A deadline timer exists only for a run with a deadline.
  if (tonumber(r[6] or '0') or 0) > 0 then
    redis.call('ZREM', KEYS[6 + 2 * ctl], deadlinejson(run, r[2]))
  end
  stepevent(EVENTS, 'run.completed', now, 0, {})
  local ret = r[5] or '0'
  if (tonumber(ret) or 0) > 0 then
    redis.call('PEXPIRE', STATE, ret)
    redis.call('PEXPIRE', EVENTS, ret)
    -- applied, items and comp exist only for runs that took other
    -- scripts: one EXISTS saves three calls for the others.
    if redis.call('EXISTS', APPLIED, ITEMS, COMP) > 0 then
      redis.call('PEXPIRE', APPLIED, ret)
      redis.call('PEXPIRE', ITEMS, ret)
      redis.call('PEXPIRE', COMP, ret)
    end
  end
end
return 'ok'
