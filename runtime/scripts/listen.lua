-- listen: a worker reached a task whose handler is the built-in signal
-- (docs/waiting.md, "Signals"). It parks the execution: state waiting,
-- field sw|x the JSON record {name, corr, node, iter, hop, att, gen, due}, event
-- node.waiting (with the signal's name and correlation). If a signal of
-- that name and correlation was kept for it (field sb|name|corr: a JSON
-- list of payloads, oldest first), it takes the oldest at once: field
-- sd|x its payload, a token of kind signal in the node queue's stream,
-- event signal.received. Else it puts x last in the waiters of
-- (name, corr) (field sq|name|corr: a JSON list of exec keys) and, with a
-- timeout, a token of kind sigtimeout in the node queue's timers at due.
-- It acknowledges the exec message without completing the execution: its
-- counter unit stays held; the signal token's complete (or the timeout's
-- failure) releases it.
-- A: node, iter, hop, gen, attempt, msg, name, corr, due (ms; 0: none).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
local x = xkey(A.node, A.iter)
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local cur = redis.call('HGET', STATE, x)
if cur ~= 'queued' and cur ~= 'running' and cur ~= 'retrying' then ack(); return 'dup' end

local sk = A.name .. '|' .. A.corr
local rec = cjson.encode({name = A.name, corr = A.corr, node = A.node, iter = A.iter, hop = A.hop, att = A.attempt, gen = GEN, due = A.due})
redis.call('HSET', STATE, x, 'waiting', 'sw|' .. x, rec)
redis.call('HDEL', STATE, 'sd|' .. x)
event('node.waiting', 0, 'x', x, 'signal', A.name, 'correlation', A.corr, 'due', A.due)
local buf = redis.call('HGET', STATE, 'sb|' .. sk)
if buf then
  local list = cjson.decode(buf)
  local p = table.remove(list, 1)
  if #list == 0 then
    redis.call('HDEL', STATE, 'sb|' .. sk)
  else
    redis.call('HSET', STATE, 'sb|' .. sk, cjson.encode(list))
  end
  redis.call('HINCRBY', STATE, 'run|signals', -1)
  redis.call('HSET', STATE, 'sd|' .. x, p)
  redis.call('XADD', qstream(g.q), '*', 't', token('signal', A.node, A.iter, A.hop, A.attempt, -1))
  event('signal.received', 0, 'x', x, 'signal', A.name, 'correlation', A.corr, 'kept', 1)
else
  local wl = redis.call('HGET', STATE, 'sq|' .. sk)
  local list = wl and cjson.decode(wl) or {}
  local found = false
  for _, w in ipairs(list) do if w == x then found = true end end
  if not found then list[#list + 1] = x end
  redis.call('HSET', STATE, 'sq|' .. sk, cjson.encode(list))
  if A.due > 0 then
    redis.call('ZADD', qtimers(g.q), A.due, token('sigtimeout', A.node, A.iter, A.hop, A.attempt, -1))
  end
end
ack()
return 'ok'
