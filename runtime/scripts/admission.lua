-- admission.lua: what take.lua and admit.lua share, the moves of new
-- runs' entry tokens into their queues' streams (docs/runtime.md,
-- "Scheduling"). Both have the same KEYS: 1 the shard's admission hash,
-- then for each queue i: 2i its stream, 2i+1 its entry stream.

-- params reads the numbers both scripts take, ARGV[at] to ARGV[at + 3]:
-- n, admit, grant and age (the queue names follow them), and returns them
-- and nq, the number of queues, or nil when they or the counts of KEYS and
-- ARGV are not what a call must pass.
local function params(at)
  local n, admit, grant, age = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]),
    tonumber(ARGV[at + 3])
  local nq = (#KEYS - 1) / 2
  if not n or n < 1 or n % 1 ~= 0 or not admit or admit < 0 or admit % 1 ~= 0 or not grant or grant < 0 or grant % 1 ~= 0
    or not age or nq < 1 or nq % 1 ~= 0 or #ARGV ~= at + 3 + nq then
    return nil
  end
  return n, admit, grant, age, nq
end

-- move moves up to k entry tokens of queue i to its stream; it returns
-- how many it moved.
local function move(i, k)
  local es = redis.call('XRANGE', KEYS[2 * i + 1], '-', '+', 'COUNT', k)
  if #es == 0 then return 0 end
  local ids = {'XDEL', KEYS[2 * i + 1]}
  for _, e in ipairs(es) do
    -- e: the entry stream's id, when start wrote the token (the worker's
    -- freshness goes by it, not by the new id: fresh.go).
    local f = e[2]
    f[#f + 1] = 'e'
    f[#f + 1] = e[1]
    redis.call('XADD', KEYS[2 * i], '*', unpack(f))
    ids[#ids + 1] = e[1]
  end
  redis.call(unpack(ids))
  return #es
end

-- waiting returns 1 when an entry token waits in one of the nq queues'
-- entry streams, else 0.
local function waiting(nq)
  for i = 1, nq do
    if redis.call('XLEN', KEYS[2 * i + 1]) > 0 then return 1 end
  end
  return 0
end

-- aged is what a read that admits none (its continuations fill it, or
-- its admit is 0) does: starvation's bound. An entry token that waited
-- age ms or more is moved to its queue's tail, where it is read in its
-- turn, at most one per queue every age ms (the field aged|<queue> of
-- the admission hash, KEYS[1]; the queue's name is ARGV[names + i]). It
-- returns held: 1 when an entry token waits and the read had room.
local function aged(nq, room, age, names)
  local held = 0
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for i = 1, nq do
    local h = redis.call('XRANGE', KEYS[2 * i + 1], '-', '+', 'COUNT', 1)[1]
    if h and room > 0 then held = 1 end
    if h and now - tonumber(string.match(h[1], '^%d+')) >= age then
      -- One such move per queue every `age` ms: a move at every full
      -- read would admit new runs faster than runs end under a long
      -- burst, and every run would slow down again.
      local f = 'aged|' .. ARGV[names + i]
      if now - tonumber(redis.call('HGET', KEYS[1], f) or '0') >= age then
        move(i, 1)
        redis.call('HSET', KEYS[1], f, now)
      end
    end
  end
  return held
end

-- credit grants each of the nq queues (their names ARGV[names + i])
-- grant credits in the admission hash (KEYS[1]), unless it has that many: a
-- worker about to block, whose read drained the streams while no new run
-- waited, lets that many new runs' entry tokens go straight to the
-- streams, which wakes its blocked read (docs/runtime.md, "Scheduling").
local function credit(nq, grant, names)
  for i = 1, nq do
    local c = tonumber(redis.call('HGET', KEYS[1], ARGV[names + i]) or '0')
    if c < grant then redis.call('HSET', KEYS[1], ARGV[names + i], grant) end
  end
end
