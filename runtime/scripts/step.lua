-- step.lua: what every script that writes a run's steps shares — lib.lua
-- (so every run script) and the fast paths advance and begin, which run
-- without lib.lua — so that the fast paths write exactly what the general
-- scripts write: a token's layout (runtime/token.go reads it), a deadline
-- timer's, an event entry's and the counter's field.

-- COUNTER: the field of a run's state hash that counts its outstanding
-- work units (lib.lua). The run's own fields (status, gen, graph, ...) are
-- all named run|<name> in the same hash.
--
-- A new run's first write sets run|graph, its graph key suffix, which is
-- longer (73 characters or more: "sha256:", 64 hex digits, "." and the
-- queue hash) than Redis's hash-max-listpack-value (64
-- by default), so the state hash is a hashtable from the start. A listpack
-- finds each field by a linear scan, and a wide run's state has hundreds
-- of fields: in a 100-wide fan-out, HSET took 8.9 µs and HMGET 4.6 µs in a
-- listpack (0.5 to 1 in a hashtable), and a node execution 58 µs of Redis
-- CPU against 35.
local COUNTER = 'run|counter'

-- GROUP: the consumer group of every queue stream (runtime.Group; a test
-- keeps the two equal). The fast paths acknowledge their message in it.
local GROUP = 'wfc'

-- call is redis.call: a local is read without the two table lookups
-- (globals, then redis) that each use of redis.call costs. The helpers
-- below use redis.call instead: a local that a function uses is made an
-- upvalue when the function is made, on every call of every script,
-- whether the script calls that function or not.
local call = redis.call

-- bigcall runs t[1] (a command) on key t[2] with the arguments t[3..n],
-- in chunks when they are many: Lua's unpack takes about 8,000 values, and
-- a node with thousands of successors (or a run with thousands of entry
-- nodes) writes more. CHUNK is even, so HSET's field-value pairs stay
-- together; HMGET's replies are concatenated in order. (bigcall uses its
-- value, not the local: see call.)
local CHUNK = 2000
local function bigcall(t, n)
  if n <= 2002 then return redis.call(unpack(t, 1, n)) end
  local out, k = {}, 0
  for i = 3, n, 2000 do
    local r = redis.call(t[1], t[2], unpack(t, i, math.min(i + 1999, n)))
    if type(r) == 'table' then
      for x = 1, #r do k = k + 1; out[k] = r[x] end
    end
  end
  return out
end

-- joinlist joins t[1..n] with commas, in pieces: the embedded server's Lua
-- overflows its registry concatenating thousands of strings at once.
local function joinlist(t, n)
  if n <= 500 then return table.concat(t, ',', 1, n) end
  local parts = {}
  for i = 1, n, 500 do parts[#parts + 1] = table.concat(t, ',', i, math.min(i + 499, n)) end
  return table.concat(parts, ',')
end

-- itos: an integer as a string. Redis's Lua turns a number into a string
-- with sprintf, about 0.3 µs each (as much as a small redis.call); the
-- counts and deltas of a step are almost always one of these. Otherwise a
-- concatenation, which formats as tostring does without a call of it.
local function itos(v)
  if v == 1 then return '1' elseif v == -1 then return '-1' elseif v == 0 then return '0' elseif v == 2 then return '2' end
  return v .. ''
end

-- tokenjson builds a queue message. Ids and iteration vectors never need
-- JSON escaping (the runtime checks run and node ids). An exec token also
-- carries its run's graph suffix g and hop limit mh (meta fields graph and
-- max_hops), so that a worker can run a fresh one without reading the
-- run's meta first; a finish token too, so that a worker knows which
-- outputs to pre-read for it. hop, attempt, item, gen and mh may be numbers or
-- their strings (the fast paths pass strings: see itos). o, when given,
-- is the JSON object of the state fields an exec token carries (carry).
local function tokenjson(kind, run, n, vec, hop, attempt, item, gen, g, mh, o)
  -- One concatenation per shape: each intermediate string would be hashed
  -- whole (Redis's Lua hashes every byte of a new string) and be garbage.
  if kind == 'exec' then
    if o then
      return '{"kind":"exec","run":"' .. run .. '","node":"' .. n .. '","iter":"' .. vec .. '","hop":' .. hop ..
        ',"attempt":' .. attempt .. ',"item":' .. item .. ',"gen":' .. gen .. ',"g":"' .. g .. '","mh":' .. mh ..
        ',"o":' .. o .. '}'
    end
    return '{"kind":"exec","run":"' .. run .. '","node":"' .. n .. '","iter":"' .. vec .. '","hop":' .. hop ..
      ',"attempt":' .. attempt .. ',"item":' .. item .. ',"gen":' .. gen .. ',"g":"' .. g .. '","mh":' .. mh .. '}'
  elseif kind == 'finish' and g and g ~= '' then
    return '{"kind":"finish","run":"' .. run .. '","node":"' .. n .. '","iter":"' .. vec .. '","hop":' .. hop ..
      ',"attempt":' .. attempt .. ',"item":' .. item .. ',"gen":' .. gen .. ',"g":"' .. g .. '","mh":' .. mh .. '}'
  end
  return '{"kind":"' .. kind .. '","run":"' .. run .. '","node":"' .. n .. '","iter":"' .. vec .. '","hop":' .. hop ..
    ',"attempt":' .. attempt .. ',"item":' .. item .. ',"gen":' .. gen .. '}'
end

-- CARRYMAX: the bytes of values an exec token carries at most
-- (runtime.carryMax); over it the token carries none, and the worker
-- reads them.
local CARRYMAX = 4096

-- carry returns the JSON object an exec token carries: the state fields
-- named in fields[1..n] (an execution's inputs: the outputs its node's
-- expressions read, docs/runtime.md "Tokens") with their values vals[1..n]
-- (false: absent, as HMGET replies), or nil when the values are larger
-- than CARRYMAX. Field names need no escaping (node ids).
local function carry(fields, vals, n)
  if n == 1 then
    -- The common case, without the parts table.
    local v = vals[1]
    if not v then return '{"' .. fields[1] .. '":null}' end
    if #v > CARRYMAX then return nil end
    return '{"' .. fields[1] .. '":' .. cjson.encode(v) .. '}'
  end
  local parts, size = {}, 0
  for i = 1, n do
    local v = vals[i]
    if v then
      size = size + #v
      if size > CARRYMAX then return nil end
      parts[i] = '"' .. fields[i] .. '":' .. cjson.encode(v)
    else
      parts[i] = '"' .. fields[i] .. '":null'
    end
  end
  return '{' .. table.concat(parts, ',', 1, n) .. '}'
end

-- deadlinejson is the timer entry of a run's deadline (a token of kind
-- deadline) for generation gen, a number or its string.
local function deadlinejson(run, gen)
  return '{"kind":"deadline","run":"' .. run .. '","gen":' .. gen .. '}'
end

-- stepevent appends an event to the run's log. ev holds the XADD's
-- arguments — 'XADD', the events key, '*', 'type', the type, 'ts', the
-- time (ms), then the event's own fields, name and value, all strings —
-- and k is their count; stepevent adds dc when not 0 and next, the nn
-- executions the step queued ("x:hop" each, in the table next), when
-- there are any. The caller sizes ev with room for both (a table that
-- grows is reallocated).
local function stepevent(ev, k, dc, next, nn)
  if dc ~= 0 then
    ev[k + 1] = 'dc'
    ev[k + 2] = itos(dc)
    k = k + 2
  end
  if nn == 1 then
    ev[k + 1] = 'next'
    ev[k + 2] = next[1]
    k = k + 2
  elseif nn > 1 then
    ev[k + 1] = 'next'
    ev[k + 2] = joinlist(next, nn)
    k = k + 2
  end
  redis.call(unpack(ev, 1, k))
end
