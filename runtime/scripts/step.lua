-- step.lua: what every script that writes a run's steps shares — lib.lua
-- (so every run script) and the fast paths advance and begin, which run
-- without lib.lua — so that the fast paths write exactly what the general
-- scripts write: a token's layout (runtime/token.go reads it) and an event
-- entry's.

-- tokenjson builds a queue message. Ids and iteration vectors never need
-- JSON escaping (the runtime checks run and node ids). An exec token also
-- carries its run's graph suffix g and hop limit mh (meta fields graph and
-- max_hops), so that a worker can run a fresh one without reading the
-- run's meta first.
local function tokenjson(kind, run, n, vec, hop, attempt, item, gen, g, mh)
  local t = '{"kind":"' .. kind .. '","run":"' .. run .. '","node":"' .. n .. '","iter":"' .. vec ..
    '","hop":' .. tostring(hop) .. ',"attempt":' .. tostring(attempt) .. ',"item":' .. tostring(item) ..
    ',"gen":' .. tostring(gen)
  if kind == 'exec' then
    return t .. ',"g":"' .. g .. '","mh":' .. tostring(mh) .. '}'
  end
  return t .. '}'
end

-- stepevent appends an event to the run's log (key events): its type, ts,
-- dc when not 0, the fields in extra (name, value, ...), and next — the
-- executions the step queued, "x:hop" each — when there are any.
local function stepevent(events, typ, now, dc, extra, next)
  local args = {'XADD', events, '*', 'type', typ, 'ts', now}
  if dc ~= 0 then
    args[#args + 1] = 'dc'
    args[#args + 1] = tostring(dc)
  end
  for i = 1, #extra do args[#args + 1] = tostring(extra[i]) end
  if next and #next > 0 then
    args[#args + 1] = 'next'
    args[#args + 1] = table.concat(next, ',')
  end
  redis.call(unpack(args))
end
