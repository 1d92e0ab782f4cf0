-- patch: moves a running run to a patched workflow (runtime/patch.go,
-- docs/patching.md): checks the patch against the run's live state, then
-- writes the new IR hash, graph, queues and version, a patch.applied event
-- and the tokens of edges added behind nodes that had finished — all or
-- nothing, like every transition. KEYS: lib.lua's, with the NEW graph and
-- the new workflow's queues.
-- A: base (the IR hash the patch was made against), ir, graph (the new
--    IR hash and graph suffix), patch (JSON text), by, dry, unstarted
--    [[x, why]] (executions that must not exist), noarrival [[field, why]]
--    (join arrivals that must not exist), unsent [[x, why]] (sources that
--    must not have finished), added [{from, x, to, vec, kind, real, ok}]
--    (edges added behind sources that may have finished), entries
--    [[id, vec]] (new entry nodes), states [x] (reported).
-- Reply: JSON {status: ok | dry | refused | conflict, version, reasons,
-- states, delivered}.
local m = redis.call('HMGET', STATE, 'run|status', 'run|gen', 'run|retention', 'run|max_hops', 'run|ir', 'run|ver')
if not m[1] then return fail('unknown run ' .. RUN) end
-- cjson encodes an empty table as {}: empty lists are left out.
local function reply(t)
  if #t.reasons == 0 then t.reasons = nil end
  if t.delivered and #t.delivered == 0 then t.delivered = nil end
  if t.states and next(t.states) == nil then t.states = nil end
  return cjson.encode(t)
end
-- A list argument: JSON null (an empty Go slice) decodes as cjson.null.
local function list(t) if type(t) ~= 'table' then return {} end return t end
A.unstarted, A.noarrival, A.unsent = list(A.unstarted), list(A.noarrival), list(A.unsent)
A.added, A.entries, A.states = list(A.added), list(A.entries), list(A.states)
local ver = tonumber(m[6] or '1') or 1
if m[5] ~= A.base then return reply({status = 'conflict', version = ver, reasons = {}}) end
if m[1] ~= 'running' then
  return reply({status = 'refused', version = ver, reasons = {'the run is ' .. m[1] .. ': only a running run can be patched'}})
end
GEN = tonumber(m[2])
-- A run whose work is done and whose outputs a worker is computing
-- (lib.lua's settle) ends with the finish token: too late for new work.
if redis.call('HGET', STATE, 'run|finishing') == m[2] then
  return reply({status = 'refused', version = ver, reasons = {'the run is finishing (its work is done, its outputs are being computed): it can no longer be patched'}})
end
RET = tonumber(m[3] or '0') or 0
MAXHOPS = tonumber(m[4] or '0') or 0
GSFX = A.graph

local reasons = {}
local function refuse(why) reasons[#reasons + 1] = why end
local function finished(s) return s == 'completed' or s == 'skipped' or s == 'failed' end

for _, u in ipairs(A.unstarted) do
  local s = redis.call('HGET', STATE, u[1])
  if s then refuse(u[2] .. ' (' .. u[1] .. ' is ' .. s .. ')') end
end
for _, u in ipairs(A.noarrival) do
  if redis.call('HEXISTS', STATE, u[1]) == 1 then refuse(u[2]) end
end
for _, u in ipairs(A.unsent) do
  local s = redis.call('HGET', STATE, u[1])
  if finished(s) then refuse(u[2] .. ' (' .. u[1] .. ' is ' .. s .. ')') end
end
-- The tokens of edges behind finished sources: a completed plain node
-- sends a real token on an after edge and a skip on an error edge; a
-- skipped one skips everything behind it. A failed one, or a source whose
-- token cannot be told (a branch, loop or for_each node, or in a loop),
-- refuses the edge.
local deliver = {}
for _, e in ipairs(A.added) do
  local s = redis.call('HGET', STATE, e.x)
  if finished(s) then
    if not e.ok or s == 'failed' or (s == 'completed' and e.kind ~= 'after' and e.kind ~= 'error') then
      refuse('edge ' .. e.from .. ' -> ' .. e.to .. ' (' .. e.kind .. ') cannot be added: ' .. e.from .. ' is ' .. s ..
        ' and the token it would have sent cannot be told')
    else
      local real = s == 'completed' and e.real
      deliver[#deliver + 1] = {e.to, e.vec, e.from, e.kind, real, tonumber(redis.call('HGET', STATE, 'hop|' .. e.x) or '0') or 0}
    end
  end
end

local states = {}
if #A.states > 0 then
  local t = {'HMGET', STATE}
  for i, x in ipairs(A.states) do t[i + 2] = x end
  local vals = bigcall(t, #A.states + 2)
  for i, x in ipairs(A.states) do
    if vals[i] then states[x] = vals[i] end
  end
end
if #reasons > 0 then return reply({status = 'refused', version = ver, reasons = reasons, states = states}) end
local delivered = {}
for _, d in ipairs(deliver) do delivered[#delivered + 1] = d[1] end
for _, en in ipairs(A.entries) do delivered[#delivered + 1] = en[1] end
if A.dry then return reply({status = 'dry', version = ver, reasons = {}, states = states, delivered = delivered}) end
if not redis.call('HGET', GRAPH, '_') then return fail('graph ' .. GRAPH .. ' is not stored') end

ver = ver + 1
redis.call('HSET', STATE, 'run|ir', A.ir, 'run|graph', A.graph, 'run|queues', table.concat(A.queues, ','), 'run|ver', tostring(ver))
fold('patch.applied', 0, 'old', A.base, 'new', A.ir, 'version', ver, 'by', A.by, 'patch', A.patch)
for _, en in ipairs(A.entries) do dispatch(en[1], en[2], 1) end
for _, d in ipairs(deliver) do push(d[1], d[2], d[3], d[4], d[5], d[6]) end
drain()
unfold()
if DC ~= 0 then settle() end
return reply({status = 'ok', version = ver, reasons = {}, states = states, delivered = delivered})
