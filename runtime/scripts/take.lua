-- take: a worker's read of one shard's queues, the work of runs in flight
-- first (docs/runtime.md, "Scheduling"). A new run's entry tokens wait in
-- the queue's entry stream (start.lua, begin.lua); take moves them into the
-- queue's stream only when its continuations are drained, and reads them.
-- KEYS: 1 the shard's admission hash (queue -> credits; aged|<queue> -> when
--       an aged entry token was last moved), then for each
--       queue i: 2i its stream, 2i+1 its entry stream.
-- ARGV: 1 group, 2 consumer, 3 n (messages wanted), 4 admit (how many
--       entry tokens it may admit, 0 to n: the worker's admission target
--       less its executions running), 5 grant (how many credits to grant,
--       a whole number, runtime.maxCredits at most: the worker blocks next
--       if this reads nothing; '0': it would not block), 6 age (ms an
--       entry token may wait before it is admitted whatever the
--       continuations), then for each queue i: 6+i its name.
-- Reply: {read, held}: read is what XREADGROUP replies, [[stream, [[id,
-- [field, value, ...]], ...]], ...] (an empty list when nothing was read);
-- held is 1 when entry tokens wait that admit held back (the streams had
-- room for them), else 0.
--
-- Admission (every move is atomic: an entry token is in exactly one of the
-- two streams, never pending in the entry stream, which has no group):
-- * when the continuations left fewer than n messages, the oldest entry
--   tokens fill the rest, up to admit, oldest queue first;
-- * starvation: an entry token that waited `age` ms or more is moved to
--   its queue's tail whatever the continuations and admit (at most one
--   per queue every `age` ms), where it is read in its turn;
-- * credits: a worker about to block if it reads nothing (idle) that
--   reads fewer than n (its streams are drained, nothing waits) grants
--   its queues credits (a few: runtime.maxCredits, worker.go, says why);
--   start and begin put a new run's entry
--   token straight into the queue's stream while credits last, which wakes
--   the blocked read. Only a start spends them: a busy worker that took
--   them back could leave another one, blocked on the same queue, idle
--   while new runs wait. So a worker that was idle and got busy leaves
--   at most its grant per queue, which as many new runs spend.
local group, consumer = ARGV[1], ARGV[2]
local n, admit, grant, age, nq = params(3)
if not n then return redis.error_reply('ERR wfc: bad take call') end

local out, got = {}, 0
local function read(count, qs)
  local args = {'XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS'}
  for _, i in ipairs(qs) do args[#args + 1] = KEYS[2 * i] end
  for _ in ipairs(qs) do args[#args + 1] = '>' end
  local r = redis.call(unpack(args))
  if r then
    for _, s in ipairs(r) do
      out[#out + 1] = s
      got = got + #s[2]
    end
  end
end

local all = {}
for i = 1, nq do all[i] = i end
read(n, all)

local room = n - got
local budget = math.min(room, admit)
local held = 0
if budget > 0 then
  -- Every stream gave fewer than n (COUNT bounds each), so each is
  -- drained: what is moved now is all that is left to read there.
  local moved, most = {}, 0
  for i = 1, nq do
    if budget == 0 then break end
    local k = move(i, budget)
    if k > 0 then
      moved[#moved + 1] = i
      most = math.max(most, k)
      budget = budget - k
    end
  end
  if most > 0 then read(most, moved) end
  if budget == 0 and room > admit then held = waiting(nq) end
else
  held = aged(nq, room, age, 6)
end

-- Also when it read some (a lone run's next token): a drained read would
-- admit new runs as they come anyway, and the worker, which skips this
-- script before blocking while enough credits are left (worker.go,
-- blockAtOnce), need not come back with a read of nothing to top them up.
-- Not while entry tokens wait (held): a start that spent a credit would
-- go ahead of them.
if got < n and grant > 0 and held == 0 then credit(nq, grant, 6) end
return {out, held}
