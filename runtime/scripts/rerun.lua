-- rerun: partial retry of a failed (or cancelled) run. Completed and
-- skipped executions keep their state and outputs; the execution that
-- failed the run and every execution that was queued, running, waiting
-- on a retry or on an approval (which gets a new approval) are queued
-- again under a new generation, so that tokens of the old generation are
-- stale.
-- A: deadline_at (ms, 0 for none).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if st ~= 'failed' and st ~= 'cancelled' then return fail('run ' .. RUN .. ' is ' .. st .. '; only a failed or cancelled run can be retried') end
if redis.call('HGET', STATE, 'run|comp') == 'running' then return fail('run ' .. RUN .. ' is still compensating') end
local info = redis.call('HGET', GRAPH, '_')
-- A private engine's graph (wfc run --redis) goes when that process ends.
if not info then return fail('the graph of run ' .. RUN .. ' is not stored: a run of wfc run --redis cannot be retried once that process has ended') end
info = cjson.decode(info)
local fx = redis.call('HGET', STATE, 'run|failed_node')
local all = redis.call('HGETALL', STATE)
local again = {}
for i = 1, #all, 2 do
  local x, s = all[i], all[i + 1]
  if not string.find(x, '|', 1, true) then
    if s == 'queued' or s == 'running' or s == 'retrying' or s == 'waiting' or (s == 'failed' and x == fx) then
      local n, vec = splitx(x)
      local g = gnode(n)
      if not g or not qstream(g.q) then return fail('cannot requeue ' .. x) end
      again[#again + 1] = {x, n, vec}
    end
  end
end
table.sort(again, function(a, b) return a[1] < b[1] end)

GEN = GEN + 1
redis.call('HSET', STATE, 'run|status', 'running', 'run|gen', GEN, 'run|comp', '', COUNTER, 0)
redis.call('HDEL', STATE, 'run|failed_node', 'run|ended', 'run|error', 'run|result')
keeprun()
event('run.retried', 0, 'gen', GEN, 'counter', 0)
for _, a in ipairs(again) do
  local x, n, vec = a[1], a[2], a[3]
  local hop = tonumber(redis.call('HGET', STATE, 'hop|' .. x) or '1')
  redis.call('HSET', STATE, x, 'queued')
  redis.call('HDEL', STATE, 'err|' .. x, 'att|' .. x)
  redis.call('XADD', qstream(gnode(n).q), '*', 't', token('exec', n, vec, hop, 1, -1))
  event('node.queued', 1, 'x', x, 'hop', hop)
end
if A.deadline_at > 0 then
  redis.call('ZADD', qtimers(info.ctl), A.deadline_at, deadline_member())
end
settle()
return 'ok'
