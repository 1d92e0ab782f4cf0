-- complete: the whole transition of one node execution.
-- A: node, iter, hop, gen, msg, mode ('ok' | 'skip' | 'fail'), output (JSON
--    text, mode ok), error and code (mode fail), real ([[to, kind]]: the edges that get
--    real tokens; every other forward edge gets a skip), loop (true: start
--    the next iteration of the node's loop instead of routing), item (the
--    for_each item whose failure fails the node, or -1), failrun (true: the
--    failure fails the run), maxstate (lib.lua's overstate: an output
--    that does not fit is refused, reply 'state', writing nothing; an
--    error that does not fit fails the run with code state instead), drop
--    (true: an exec token of a for_each node, which may be running
--    already: a redelivery after its load started).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
if A.mode ~= 'ok' and A.mode ~= 'skip' and A.mode ~= 'fail' then return fail('bad mode ' .. tostring(A.mode)) end
local realset, outset = {}, {}
for _, o in ipairs(g.out or {}) do outset[o[1] .. '|' .. o[2]] = true end
for _, e in ipairs(A.real or {}) do
  local k = e[1] .. '|' .. e[2]
  if not outset[k] then return fail('node ' .. A.node .. ' has no edge to ' .. e[1] .. ' (' .. e[2] .. ')') end
  realset[k] = true
end
if A.loop and (A.mode ~= 'ok' or not g.back) then return fail('node ' .. A.node .. ' cannot loop') end
local x = xkey(A.node, A.iter)
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
-- The execution's state is the guard: a completion applies only to a queued,
-- running or retrying execution of the current generation, and sets a
-- terminal state, so a second delivery of the same completion is a dup.
-- (A partial retry requeues executions under a new generation; completions
-- of the old one are stale above.)
local cur = redis.call('HGET', STATE, x)
if not cur or terminal(cur) then ack(); return 'dup' end

local size = 0
if A.mode == 'ok' then size = #A.output elseif A.mode == 'fail' then size = #(A.error or '') end
if overstate(size) then
  if A.mode == 'ok' then return 'state' end
  -- (Its first 256 bytes are kept, not counted: once, as the run ends.)
  local cut = string.sub(A.error, 1, 256)
  if #cut < size then cut = cut .. '...' end
  A.error = cut .. ' [the error of ' .. x .. ', ' .. size .. ' bytes, would take the run\'s stored values over the limit of ' ..
    A.maxstate .. ' bytes (max_state_bytes)]'
  A.code, A.failrun, size = 'state', true, 0
end

-- Writes.
if A.mode ~= 'skip' then addbytes(size) end
local consumed = -1
if A.item >= 0 or (A.drop and cur == 'running') then
  -- An item failed the for_each node (or a redelivered exec token, poison
  -- or failing its evaluation now, fails it): the items still in flight
  -- (queued, running or waiting on a retry) die with it.
  local it = redis.call('HMGET', ITEMS, x .. '|next', x .. '|done', x .. '|kept', x .. '|ld', x .. '|n')
  consumed = -(tonumber(it[1] or '0') - (tonumber(it[2] or '0') - tonumber(it[3] or '0')))
  -- A load still in progress holds the exec token's unit (expand.lua).
  if it[4] and tonumber(it[4]) < tonumber(it[5]) then consumed = consumed - 1 end
end
if A.mode == 'ok' then
  redis.call('HSET', STATE, x, 'completed')
  redis.call('HSET', STATE, 'out|' .. x, A.output)
  if A.iter ~= '' then redis.call('HSET', STATE, 'out|' .. A.node, A.output); redis.call('HDEL', STATE, 'er|' .. A.node) end
  -- A loop node's iteration count, for L.iteration after the loop: its own
  -- loop is the innermost, the vector's last component.
  if g.back then redis.call('HSET', STATE, 'it|' .. A.node, string.match(A.iter, '(%d+)$') or '1') end
  if g.cq then addcomp(x) end
  if A.failrun then
    event('node.completed', consumed, 'x', x, 'output', A.output)
  else
    -- The executions it queues go in its event (next).
    fold('node.completed', consumed, 'x', x, 'output', A.output)
  end
elseif A.mode == 'skip' then
  redis.call('HSET', STATE, x, 'skipped')
  if A.iter ~= '' then redis.call('HDEL', STATE, 'out|' .. A.node, 'er|' .. A.node) end
  event('node.skipped', consumed, 'x', x)
else
  -- The error code (ec|x), and x.error for the nodes on its error path
  -- (er|node: this iteration's in a loop body).
  local code = A.code or 'error'
  redis.call('HSET', STATE, x, 'failed', 'err|' .. x, A.error, 'ec|' .. x, code,
    'er|' .. A.node, cjson.encode({code = code, message = A.error}))
  -- In a loop body, x.output is this iteration's: none when it failed.
  if A.iter ~= '' then redis.call('HDEL', STATE, 'out|' .. A.node) end
  event('node.failed', consumed, 'x', x, 'error', A.error, 'code', code, 'handled', A.failrun and '0' or '1')
end

if A.failrun then
  redis.call('HINCRBY', STATE, COUNTER, DC)
  DC = 0
  failrun(A.error, x)
  ack()
  return 'failed'
end
if A.loop then
  local i = tonumber(string.match(A.iter, '(%d+)$'))
  local bg = gnode(g.back)
  dispatch(g.back, tvec(g, A.iter, bg, A.node, i + 1), A.hop + 1)
else
  route(A.node, A.iter, A.hop, realset)
  drain()
end
if FOLD then unfold() end
ack()
-- The counter held this execution's unit, so with a zero delta it is still
-- positive and the run goes on: no need to touch it.
if DC ~= 0 then settle() end
return 'ok'
