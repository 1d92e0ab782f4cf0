-- admit: take.lua's admission without its read, for a pipeline that
-- reads next with a plain XREADGROUP (worker.go: a worker's read loop,
-- readAdmit, and a completion's read, queueTake). take reads the queues'
-- streams inside the script, so every message it reads becomes a Lua
-- table and then the script's reply again: about 4.5 µs of Redis CPU per
-- message, two thirds of a take of ten (docs/performance.md, "Issue #19,
-- seventh pass"). admit counts the
-- messages that read will find instead, from each queue's consumer group
-- (XINFO GROUPS: lag, the entries not yet delivered to the group, Redis
-- 7.0 and later), and admits new runs into the room they leave, as take
-- does with what it read: when the continuations leave fewer than n, the
-- oldest entry tokens fill the rest, up to admit, oldest queue first; else
-- it moves an entry token that waited age ms (aged, admission.lua), which
-- the read then takes if it has room (take's next read would); and
-- when the read will find fewer than n, it grants credits as take does.
-- KEYS: as take's: 1 the shard's admission hash, then for each queue i:
--       2i its stream, 2i+1 its entry stream.
-- ARGV: 1 group, 2 n (messages the read that follows reads, COUNT), 3
--       admit (how many entry tokens it may admit, 0 to n), 4 grant (as
--       take's: the credits to grant if the read will drain the streams,
--       0 for a caller that would not block), 5 age (ms), then for each
--       queue i: 5+i its name.
-- Reply: {moved, held}: how many entry tokens it moved, and held as
-- take's (1 when entry tokens wait that admit held back, or that a full
-- read left waiting). {-1, 0} when a queue's group reports no lag (a
-- server before Redis 7.0, or one that cannot tell): nothing was written,
-- and the caller goes back to take. {0, 0}, nothing written, when a
-- queue's stream or group is missing.
-- The count is exact but for what other clients do between this script
-- and the read (the same pipeline, not one transaction): a message
-- another worker reads first leaves room unused until the next read, one
-- queued meanwhile is read if the COUNT has room (else it waits, as any
-- message does).
local group = ARGV[1]
local n, admit, grant, age, nq = params(2)
if not n then return redis.error_reply('ERR wfc: bad admit call') end

-- The messages the read will find: each stream's lag in the group.
local ahead = 0
for i = 1, nq do
  -- A stream or group that is not there (deleted, a server restarted
  -- empty): the read that follows fails with NOGROUP and the worker makes
  -- them again; nothing is admitted meanwhile.
  local gs = redis.pcall('XINFO', 'GROUPS', KEYS[2 * i])
  if type(gs) ~= 'table' or gs.err then return {0, 0} end
  local found, lag = false, nil
  for _, g in ipairs(gs) do
    if g[2] == group then
      found = true
      for x = 1, #g - 1, 2 do
        if g[x] == 'lag' then lag = g[x + 1] end
      end
    end
  end
  if not found then return {0, 0} end
  if type(lag) ~= 'number' then return {-1, 0} end
  -- COUNT bounds each stream's share of the read.
  ahead = ahead + math.min(lag, n)
end

local room = n - ahead
local budget = math.min(room, admit)
local held, moved = 0, 0
if budget > 0 then
  for i = 1, nq do
    if budget == 0 then break end
    local k = move(i, budget)
    moved = moved + k
    budget = budget - k
  end
  if budget == 0 and room > admit then held = waiting(nq) end
else
  held = aged(nq, room, age, 5)
end
if ahead + moved < n and grant > 0 and held == 0 then credit(nq, grant, 5) end
return {moved, held}
