-- signal: a signal sent to the run (Engine.Signal: kind send), or the
-- timeout of a signal task (a sigtimeout token: kind timeout); docs/
-- waiting.md, "Signals". Field sd|x is the claim: a signal's payload, or
-- 'timeout'; exactly one of the signals and the timeout sets it, once per
-- parked execution (listen.lua clears it when it parks).
-- send: A: name, corr, payload (JSON text), maxbuf (how many signals the
--   run may keep), maxstate. It gives the payload to the first waiter of
--   (name, corr) (sq|name|corr) that still waits in this generation: sd|x,
--   its timeout token removed, a token of kind signal in its node queue's
--   stream, event signal.received; reply 'x:' .. the exec key. With no
--   waiter it keeps it (sb|name|corr, last; run|signals counts them; its
--   bytes count in run|bytes), event signal.kept; reply 'kept'. A run not
--   running, or one over its limits, refuses it: an error, nothing written.
-- timeout: A: node, iter, gen, attempt, msg. It claims the execution if it
--   still waits for this attempt with no signal: sd|x = 'timeout', x off
--   the waiters, event signal.timeout; reply 'timeout' (the worker then
--   fails the node with code timeout). Else 'dup' (acknowledged).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end

-- unwait takes x off the waiters of sk.
local function unwait(sk, x)
  local wl = redis.call('HGET', STATE, 'sq|' .. sk)
  if not wl then return end
  local keep = {}
  for _, w in ipairs(cjson.decode(wl)) do if w ~= x then keep[#keep + 1] = w end end
  if #keep == 0 then
    redis.call('HDEL', STATE, 'sq|' .. sk)
  else
    redis.call('HSET', STATE, 'sq|' .. sk, cjson.encode(keep))
  end
end

if A.kind == 'timeout' then
  local x = xkey(A.node, A.iter)
  if st ~= 'running' then ack(); return 'inactive' end
  if A.gen < GEN then ack(); return 'stale' end
  local v = redis.call('HMGET', STATE, x, 'sw|' .. x, 'sd|' .. x)
  if v[1] ~= 'waiting' or not v[2] then ack(); return 'dup' end
  local r = cjson.decode(v[2])
  if tonumber(r.gen) ~= GEN or tonumber(r.att) ~= tonumber(A.attempt) then ack(); return 'dup' end
  if v[3] == 'timeout' then return 'timeout' end -- a redelivery: fail it now
  if v[3] then ack(); return 'dup' end -- a signal came first
  redis.call('HSET', STATE, 'sd|' .. x, 'timeout')
  unwait(r.name .. '|' .. r.corr, x)
  event('signal.timeout', 0, 'x', x, 'signal', r.name, 'correlation', r.corr)
  return 'timeout'
end

if A.kind ~= 'send' then return fail('bad kind ' .. tostring(A.kind)) end
if st ~= 'running' then return fail('run ' .. RUN .. ' is ' .. st .. ': it takes no more signals') end
local sk = A.name .. '|' .. A.corr
local wl = redis.call('HGET', STATE, 'sq|' .. sk)
local keep, tx, tr = {}, nil, nil
for _, x in ipairs(wl and cjson.decode(wl) or {}) do
  if tx then
    keep[#keep + 1] = x
  else
    -- Executions that no longer wait (retried, timed out, an older
    -- generation's) drop off the list here.
    local v = redis.call('HMGET', STATE, x, 'sw|' .. x, 'sd|' .. x)
    if v[1] == 'waiting' and v[2] and not v[3] then
      local r = cjson.decode(v[2])
      if tonumber(r.gen) == GEN and r.name == A.name and r.corr == A.corr then tx, tr = x, r end
    end
  end
end
if tx then
  local g = gnode(tr.node)
  if not g then return fail('unknown node ' .. tostring(tr.node)) end
  if #keep == 0 then
    redis.call('HDEL', STATE, 'sq|' .. sk)
  else
    redis.call('HSET', STATE, 'sq|' .. sk, cjson.encode(keep))
  end
  redis.call('HSET', STATE, 'sd|' .. tx, A.payload)
  redis.call('ZREM', qtimers(g.q), token('sigtimeout', tr.node, tr.iter, tonumber(tr.hop), tonumber(tr.att), -1))
  redis.call('XADD', qstream(g.q), '*', 't', token('signal', tr.node, tr.iter, tonumber(tr.hop), tonumber(tr.att), -1))
  event('signal.received', 0, 'x', tx, 'signal', A.name, 'correlation', A.corr)
  return 'x:' .. tx
end
local n = tonumber(redis.call('HGET', STATE, 'run|signals') or '0')
if n >= A.maxbuf then
  return fail('run ' .. RUN .. ' keeps ' .. n .. ' signals for nodes it has not reached, its limit: this one is refused')
end
if overstate(#A.payload) then
  return fail('the signal\'s payload of ' .. #A.payload .. ' bytes would take the run\'s stored values over the limit of ' ..
    A.maxstate .. ' bytes (max_state_bytes)')
end
-- With no waiter, a stale list goes.
if wl then redis.call('HDEL', STATE, 'sq|' .. sk) end
local buf = redis.call('HGET', STATE, 'sb|' .. sk)
local list = buf and cjson.decode(buf) or {}
list[#list + 1] = A.payload
redis.call('HSET', STATE, 'sb|' .. sk, cjson.encode(list))
redis.call('HINCRBY', STATE, 'run|signals', 1)
addbytes(#A.payload)
event('signal.kept', 0, 'signal', A.name, 'correlation', A.corr, 'payload', A.payload)
return 'kept'
