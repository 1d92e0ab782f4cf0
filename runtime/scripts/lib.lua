-- lib.lua: the prologue shared by every run script (docs/runtime.md,
-- "Script contract"). Each script is step.lua, this file and its own body.
--
-- KEYS: 1 state, 2 applied, 3 events, 4 graph, 5 items, 6 comp, then for
--       each queue i of A.queues: 5+2i its stream, 6+2i its timers.
-- The state hash holds the whole run but its event log (and the applied
-- keys, for_each items and compensation list of the runs that have them),
-- so that a transition reads it with one command and writes it with one:
-- the run's own fields (run|status, run|gen, run|counter, run|graph, ...:
-- docs/runtime.md, "Keys"), execution states (x, hop|x, err|x, att|x),
-- outputs (out|x) and join bookkeeping (x|from|kind, x|#n, x|#r, x|#f).
-- ARGV[1]: a JSON object A with at least run, now (ms), queues. Messages
-- are acknowledged in step.lua's GROUP.
--
-- Rules every script follows: all preconditions are checked before the
-- first write (a script that errors half-way keeps its writes); every
-- write is guarded by an operation key in APPLIED or by a state check, so
-- running a script twice changes nothing.
local STATE, APPLIED, EVENTS, GRAPH, ITEMS, COMP =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local A = cjson.decode(ARGV[1])
local RUN, NOW = A.run, A.now
local GEN = 0
-- GSFX, MAXHOPS: the run's graph suffix and hop limit, which exec tokens
-- carry (step.lua).
local GSFX, MAXHOPS = '', 0
-- RET: the run's retention in ms (field run|retention, set by start);
-- 0 keeps its keys forever.
local RET = 0

local QI = {}
for i, q in ipairs(A.queues) do QI[q] = i end
local function qstream(q) local i = QI[q]; if i then return KEYS[5 + 2 * i] end end
local function qtimers(q) local i = QI[q]; if i then return KEYS[6 + 2 * i] end end

-- The keys of the run itself (not the shared graph and queues).
local RUNKEYS = {STATE, APPLIED, EVENTS, ITEMS, COMP}

-- expirekeys: every key of the run expires after its retention (endrun,
-- finaldone). Later writes to the run (events of a late script) keep the
-- expiry.
local function expirekeys()
  if RET > 0 then
    for _, k in ipairs(RUNKEYS) do redis.call('PEXPIRE', k, RET) end
  end
end

-- keeprun: the run runs again (partial retry): its keys no longer expire,
-- and its finally will run again at its new end.
local function keeprun()
  for _, k in ipairs(RUNKEYS) do redis.call('PERSIST', k) end
  redis.call('HDEL', STATE, 'run|finally', 'run|finally_error')
end

-- STALE: header found the caller's graph older than the run's (a patch
-- changed it); every script then replies with fail's error, whatever
-- message it gives.
local STALE = false
local function fail(msg)
  if STALE then return redis.error_reply('ERR wfc: graph changed') end
  return redis.error_reply('ERR wfc: ' .. msg)
end

-- run|bytes: the bytes of the values the run has stored — outputs, errors,
-- for_each items and item results, its result — each counted once, when
-- written (advance counts the same way). Nothing is taken off when a
-- value is deleted: the event log keeps them all. A.maxstate is the run's
-- max_state_bytes (0: none); overstate tells whether n more bytes would
-- pass it, before a script's first write, and addbytes counts them.
local function overstate(n)
  local max = A.maxstate or 0
  return max > 0 and tonumber(redis.call('HGET', STATE, 'run|bytes') or '0') + n > max
end
local function addbytes(n)
  redis.call('HINCRBY', STATE, 'run|bytes', n)
end

-- AUX: the run's state field that says it has an applied, items or comp
-- key. advance is not given those keys (its KEYS are the state, the events
-- and the streams), so it leaves the end of such a run, which must set
-- their expiry, to complete. Every write that may make one of them sets it:
-- addop and addcomp.
local function markaux() redis.call('HSET', STATE, 'run|aux', '1') end

-- addop records an operation key as applied (running the script again
-- changes nothing).
local function addop(op)
  redis.call('SADD', APPLIED, op)
  markaux()
end

-- addcomp appends a completed execution with compensate to the run's
-- compensation list.
local function addcomp(x)
  redis.call('RPUSH', COMP, x)
  markaux()
end

local GC = {}
local function gnode(id)
  local g = GC[id]
  if g == nil then
    local raw = redis.call('HGET', GRAPH, id)
    if not raw then return nil end
    g = cjson.decode(raw)
    GC[id] = g
  end
  return g
end

local function xkey(n, vec)
  if vec == nil or vec == '' then return n end
  return n .. '@' .. vec
end

local function splitx(x)
  local at = string.find(x, '@', 1, true)
  if not at then return x, '' end
  return string.sub(x, 1, at - 1), string.sub(x, at + 1)
end

local function splitvec(v)
  local t = {}
  if v == nil or v == '' then return t end
  for p in string.gmatch(v, '[^.]+') do t[#t + 1] = p end
  return t
end

-- tvec: the iteration vector of dst for a token sent by src at svec. Loops
-- around both keep src's iteration; loops entered start at 1; loop ol, if
-- given, is set to ov (a loop edge starting the next iteration).
local function tvec(sg, svec, dg, ol, ov)
  local dl = dg.loops
  if not dl or #dl == 0 then return '' end
  local sv, si = splitvec(svec), {}
  for i, l in ipairs(sg.loops or {}) do si[l] = sv[i] end
  local out = {}
  for i, l in ipairs(dl) do
    if l == ol then out[i] = tostring(ov) elseif si[l] then out[i] = si[l] else out[i] = '1' end
  end
  return table.concat(out, '.')
end

-- edgevec: the iteration key at which an edge from sg into dg@vec records
-- its arrival. An edge entering a loop body from outside delivered its
-- token in iteration 1 and counts as delivering it in every iteration.
local function edgevec(dg, vec, sg)
  local dv, sl = splitvec(vec), {}
  for _, l in ipairs(sg.loops or {}) do sl[l] = true end
  local out = {}
  for i, l in ipairs(dg.loops) do
    if sl[l] then out[i] = dv[i] else out[i] = '1' end
  end
  return table.concat(out, '.')
end

-- DC accumulates the counter delta of this script; settle() applies it.
local DC = 0
-- FOLD is set while a step folds the executions it queues into its own
-- event (node.completed, run.started): its field next lists them
-- ("x:hop,..."), instead of a node.queued event each — one stream entry
-- for the step. fold starts it with the step's event; unfold writes that
-- event, with the counter delta of the queued executions added, and then
-- the events caused meanwhile (skips), in order.
local FOLD = nil

-- writeevent writes an event (step.lua's stepevent) with its own fields in
-- the table extra, numbers or strings.
local function writeevent(typ, dc, extra, next)
  local ev = {'XADD', EVENTS, '*', 'type', typ, 'ts', NOW}
  for i = 1, #extra do ev[7 + i] = tostring(extra[i]) end
  stepevent(ev, 7 + #extra, dc, next, next and #next or 0)
end

local function event(typ, dc, ...)
  DC = DC + dc
  if FOLD then
    FOLD.buf[#FOLD.buf + 1] = {typ, dc, {...}}
    return
  end
  writeevent(typ, dc, {...})
end

local function fold(typ, dc, ...)
  DC = DC + dc
  FOLD = {typ = typ, dc = dc, extra = {...}, next = {}, buf = {}}
end

local function unfold()
  local f = FOLD
  FOLD = nil
  writeevent(f.typ, f.dc + #f.next, f.extra, f.next)
  for _, e in ipairs(f.buf) do writeevent(e[1], e[2], e[3]) end
end

local function token(kind, n, vec, hop, attempt, item, o)
  return tokenjson(kind, RUN, n, vec, hop, attempt, item, GEN, GSFX, MAXHOPS, o)
end

local function deadline_member() return deadlinejson(RUN, GEN) end

local function ack()
  if A.msg then redis.call('XACK', qstream(A.msg.q), GROUP, A.msg.id) end
end

-- checkmsg: a precondition; the consumed message's queue must be the run's.
local function checkmsg()
  if A.msg and not QI[A.msg.q] then return false end
  return true
end

local function dispatch(n, vec, hop)
  local x = xkey(n, vec)
  if redis.call('HEXISTS', STATE, x) == 1 then return end
  local g = gnode(n)
  redis.call('HSET', STATE, x, 'queued', 'hop|' .. x, tostring(hop))
  -- The fields its activation reads (graph field rd) travel with the
  -- token, as they are now (step.lua's carry).
  local o = nil
  local rd = g.rd
  if rd and #rd > 0 then o = carry(rd, redis.call('HMGET', STATE, unpack(rd)), #rd) end
  redis.call('XADD', qstream(g.q), '*', 't', token('exec', n, vec, hop, 1, -1, o))
  if FOLD then
    FOLD.next[#FOLD.next + 1] = x .. ':' .. tostring(hop)
    DC = DC + 1
  else
    event('node.queued', 1, 'x', x, 'hop', hop)
  end
end

-- The work list of arrivals still to record: {to, vec, from, kind, real, hop}.
local WQ, WN, WH = {}, 0, 1
local function push(to, vec, from, kind, real, hop)
  WN = WN + 1
  WQ[WN] = {to, vec, from, kind, real, hop}
end

-- route sends one token on every outgoing forward edge of n@vec: real on
-- the edges in realset ("to|kind" -> true), a skip on the others.
local function route(n, vec, hop, realset)
  local g = gnode(n)
  for _, e in ipairs(g.out or {}) do
    push(e[1], tvec(g, vec, gnode(e[1])), n, e[2], realset[e[1] .. '|' .. e[2]] == true, hop)
  end
end

local function skipnode(n, vec, hop)
  local x = xkey(n, vec)
  if redis.call('HEXISTS', STATE, x) == 1 then return end
  redis.call('HSET', STATE, x, 'skipped')
  -- In a loop body, x.output is this iteration's: none when it was skipped.
  if vec ~= '' then redis.call('HDEL', STATE, 'out|' .. n, 'er|' .. n) end
  event('node.skipped', 0, 'x', x)
  route(n, vec, hop, {})
end

-- cancellosers: join first j has just fired (docs/waiting.md, "Races"):
-- the pending work of the nodes that only feed it (graph field cancel,
-- ir's join_info.cancels; all outside loops, and none a for_each node:
-- ir.FirstJoinProblem) is of no use any more. Each such execution that is
-- queued, running, retrying or waiting becomes cancelled and gives back
-- its counter unit; its timers go (a retry's exec token, a wait's wake, an
-- approval's timeout and escalate, a signal's sigtimeout), an approval is
-- closed as cancelled (a decision is refused), a signal wait leaves the
-- waiters, and a child run is cancelled by the worker that takes an
-- unchild token (flow.go). A node not reached yet becomes cancelled too,
-- so that it never runs. A late token or completion of any of them finds
-- a terminal state and changes nothing. One event, join.cancelled, lists
-- them (field cancelled) with the counter delta.
local function cancellosers(j, jg)
  local list, units = {}, 0
  for _, id in ipairs(jg.cancel or {}) do
    local x = id
    local cur = redis.call('HGET', STATE, x)
    if not cur then
      redis.call('HSET', STATE, x, 'cancelled')
      list[#list + 1] = x
    elseif cur == 'queued' or cur == 'running' or cur == 'retrying' or cur == 'waiting' then
      local g = gnode(id)
      local f = redis.call('HMGET', STATE, 'hop|' .. x, 'att|' .. x, 'wt|' .. x, 'ap|' .. x, 'sw|' .. x, 'fl|' .. x)
      local hop = f[1] or '1'
      if cur == 'retrying' and f[2] then
        redis.call('ZREM', qtimers(g.q), token('exec', id, '', hop, f[2], -1))
      elseif cur == 'waiting' then
        if f[3] then
          redis.call('ZREM', qtimers(g.q), token('wake', id, '', hop, 1, -1))
        elseif f[4] then
          local r = cjson.decode(f[4])
          local h = r.hop or hop
          redis.call('ZREM', qtimers(g.q), token('timeout', id, '', h, 1, -1), token('escalate', id, '', h, 1, -1))
          redis.call('HSET', STATE, 'ad|' .. x, cjson.encode({outcome = 'cancelled', by = '',
            comment = 'join ' .. j .. ' ran first', at = tonumber(NOW)}))
        elseif f[5] then
          local r = cjson.decode(f[5])
          local sk = 'sq|' .. r.name .. '|' .. r.corr
          local wl = redis.call('HGET', STATE, sk)
          if wl then
            local keep = {}
            for _, w in ipairs(cjson.decode(wl)) do if w ~= x then keep[#keep + 1] = w end end
            if #keep == 0 then redis.call('HDEL', STATE, sk) else redis.call('HSET', STATE, sk, cjson.encode(keep)) end
          end
          redis.call('ZREM', qtimers(g.q), token('sigtimeout', id, '', r.hop, r.att, -1))
        elseif f[6] then
          redis.call('XADD', qstream(g.q), '*', 't', token('unchild', id, '', hop, 1, -1))
        end
      end
      redis.call('HSET', STATE, x, 'cancelled')
      units = units + 1
      list[#list + 1] = x
    end
  end
  if #list > 0 then event('join.cancelled', -units, 'x', j, 'cancelled', table.concat(list, ',')) end
end

local function joincount(to, g, vec)
  local n, r = 0, 0
  for _, e in ipairs(g['in']) do
    local v = edgevec(g, vec, gnode(e[1]))
    local val = redis.call('HGET', STATE, xkey(to, v) .. '|' .. e[1] .. '|' .. e[2])
    if val then
      n = n + 1
      if val == '1' then r = r + 1 end
    end
  end
  return n, r
end

local function arrive(to, vec, from, kind, real, hop)
  local g = gnode(to)
  local ins = g['in']
  if not ins or #ins == 0 then
    if real then dispatch(to, vec, hop + 1) else skipnode(to, vec, hop) end
    return
  end
  local jk = xkey(to, vec)
  if redis.call('HSETNX', STATE, jk .. '|' .. from .. '|' .. kind, real and '1' or '0') == 0 then return end
  local n, r
  if vec == '' then
    n = redis.call('HINCRBY', STATE, jk .. '|#n', 1)
    if real then
      r = redis.call('HINCRBY', STATE, jk .. '|#r', 1)
    else
      r = tonumber(redis.call('HGET', STATE, jk .. '|#r') or '0')
    end
  else
    n, r = joincount(to, g, vec)
  end
  if g.join == 'any' or g.join == 'first' then
    if real then
      if redis.call('HSETNX', STATE, jk .. '|#f', '1') == 1 then
        dispatch(to, vec, hop + 1)
        if g.join == 'first' then cancellosers(jk, g) end
      end
    elseif n >= #ins and r == 0 then
      if redis.call('HSETNX', STATE, jk .. '|#f', '1') == 1 then skipnode(to, vec, hop) end
    end
  elseif g.join == 'settled' then
    if n >= #ins and redis.call('HSETNX', STATE, jk .. '|#f', '1') == 1 then
      if r > 0 then dispatch(to, vec, hop + 1) else skipnode(to, vec, hop) end
    end
  else
    -- join all: every source sends a real token. A source sends at most
    -- one real token on its edges to the node, so more skips than the
    -- edges beyond one per source (none, mostly) mean one sent none: the
    -- node is skipped at once.
    local ns = g.ns or #ins
    if real then
      if r >= ns and redis.call('HSETNX', STATE, jk .. '|#f', '1') == 1 then dispatch(to, vec, hop + 1) end
    elseif n - r > #ins - ns and redis.call('HSETNX', STATE, jk .. '|#f', '1') == 1 then
      skipnode(to, vec, hop)
    end
  end
end

local function drain()
  while WH <= WN do
    local it = WQ[WH]
    WQ[WH] = nil
    WH = WH + 1
    arrive(it[1], it[2], it[3], it[4], it[5], it[6])
  end
end

local function compdispatch(idx)
  local x = redis.call('LINDEX', COMP, idx)
  local n, vec = splitx(x)
  local g = gnode(n)
  redis.call('XADD', qstream(g.cq), '*', 't', token('comp', n, vec, 0, 1, idx))
  event('comp.queued', 0, 'x', x, 'idx', idx)
end

-- graphinfo: the graph's "_" entry (its control queue, outputs, finally),
-- read and decoded once per call (settle, failrun and endrun each need it).
local INFO = nil
local function graphinfo()
  if not INFO then INFO = cjson.decode(redis.call('HGET', GRAPH, '_')) end
  return INFO
end

-- endrun: the run has ended (completed, cancelled, or failed with its
-- compensations done), in the same script as the transition that ends it.
-- A workflow with a finally queues it once (a final token; finaldone
-- records it and then sets the expiry); otherwise every key of the run
-- expires after its retention now.
local function endrun()
  local info = graphinfo()
  -- A child run (flow.go) tells its parent's flow node that it ended: a
  -- child token on the control queue, which is the parent's too (a child
  -- run's id puts it in its parent's shard).
  -- A run that started child runs has a worker cancel those still
  -- running (flow.go): they run for nothing now.
  if redis.call('HEXISTS', STATE, 'run|kids') == 1 then
    redis.call('XADD', qstream(info.ctl), '*', 't', token('orphans', '', '', 0, 1, -1))
  end
  local parent = redis.call('HGET', STATE, 'run|parent')
  if parent then
    local p = cjson.decode(parent)
    redis.call('XADD', qstream(info.ctl), '*', 't',
      tokenjson('child', p.run, p.node, p.iter, p.hop, p.attempt, p.item, p.gen, '', 0))
  end
  if info.fin then
    if redis.call('HSETNX', STATE, 'run|finally', 'running') == 1 then
      redis.call('XADD', qstream(info.fq or info.ctl), '*', 't', token('final', '', '', 0, 1, -1))
      event('finally.queued', 0)
    end
    return
  end
  expirekeys()
end

-- failrun: the run fails (fail-fast); nothing is dispatched any more, and
-- the compensations of the completed nodes start, last completed first.
local function failrun(err, x)
  redis.call('HSET', STATE, 'run|status', 'failed', 'run|error', err, 'run|ended', NOW)
  if x and x ~= '' then redis.call('HSET', STATE, 'run|failed_node', x) end
  local info = graphinfo()
  redis.call('ZREM', qtimers(info.ctl), deadline_member())
  event('run.failed', 0, 'error', err, 'x', x or '')
  local n = redis.call('LLEN', COMP)
  if n > 0 then
    -- The run ends when its compensations are done (compdone).
    redis.call('HSET', STATE, 'run|comp', 'running')
    compdispatch(n - 1)
  else
    endrun()
  end
end

-- settle applies the counter delta. When no work is left the run ends: at
-- once if it has no outputs, else through a finish token that a worker
-- turns into the run's result.
local function settle()
  local c = redis.call('HINCRBY', STATE, COUNTER, DC)
  DC = 0
  if c ~= 0 then return c end
  local info = graphinfo()
  if info.outputs then
    redis.call('XADD', qstream(info.ctl), '*', 't', token('finish', '', '', 0, 1, -1))
    -- run|finishing (the generation): patch.lua refuses a run whose work
    -- is done, as finish would end it with the patch's tokens queued.
    redis.call('HSET', STATE, 'run|finishing', GEN)
    event('run.finishing', 1)
    redis.call('HINCRBY', STATE, COUNTER, DC)
    DC = 0
  else
    redis.call('HSET', STATE, 'run|status', 'completed', 'run|ended', NOW)
    redis.call('ZREM', qtimers(info.ctl), deadline_member())
    event('run.completed', 0)
    endrun()
  end
  return 0
end

-- header reads the run's status and generation; nil if the run is unknown.
local function header()
  local m = redis.call('HMGET', STATE, 'run|status', 'run|gen', 'run|retention', 'run|graph', 'run|max_hops')
  if not m[1] then return nil end
  GEN = tonumber(m[2])
  RET = tonumber(m[3] or '0') or 0
  GSFX, MAXHOPS = m[4] or '', tonumber(m[5] or '0') or 0
  -- A caller that read the run's graph before a patch (patch.lua) changed
  -- it would route on the old one: refused before any write, and the
  -- caller reads the run again (runtime.errGraphChanged): header says
  -- nil, and the script's fail replies so.
  if GSFX ~= '' and string.sub(GRAPH, -#GSFX - 7) ~= ':graph:' .. GSFX then
    STALE = true
    return nil
  end
  return m[1]
end

-- compensating checks a message about compensation idx of the run (A.gen,
-- A.msg) before compdone or compretry writes: it returns the compensation's
-- exec key and its operation key (k:<idx>:<gen>, set when it is
-- recorded), or nil and the reply — the run is unknown, not failed, of an
-- older generation, no longer compensating, or the compensation is
-- already recorded (acknowledged), or the call is bad.
local function compensating(idx)
  local st = header()
  if not st then return nil, fail('unknown run ' .. RUN) end
  if not checkmsg() then return nil, fail('the message queue is not a queue of the run') end
  if st ~= 'failed' then ack(); return nil, 'inactive' end
  if A.gen < GEN then ack(); return nil, 'stale' end
  local op = 'k:' .. tostring(idx) .. ':' .. tostring(GEN)
  if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return nil, 'dup' end
  if redis.call('HGET', STATE, 'run|comp') ~= 'running' then ack(); return nil, 'dup' end
  local x = redis.call('LINDEX', COMP, idx)
  if not x then return nil, fail('no compensation ' .. tostring(idx)) end
  return x, op
end

local function terminal(st)
  return st == 'completed' or st == 'skipped' or st == 'failed' or st == 'cancelled'
end
