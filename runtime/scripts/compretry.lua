-- compretry: schedules the next attempt of a compensation of a failed run
-- after a retryable failure (compensations follow their node's retry
-- policy): the compensation's token of attempt+1 goes into its queue's
-- timers at due. Until compdone records the compensation, the run stays
-- compensating.
-- A: gen, msg, idx, attempt (the one that failed), due (ms), error.
-- Not if an earlier delivery of this compensation was recorded (it
-- succeeded or gave up), or the run is no longer compensating.
local x, reply = compensating(A.idx)
if not x then return reply end
local op = 'kr:' .. tostring(A.idx) .. ':' .. tostring(A.attempt) .. ':' .. tostring(GEN)
if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return 'dup' end
local n, vec = splitx(x)
local g = gnode(n)
if not g or not g.cq then return fail('node ' .. n .. ' has no compensation queue') end
local timers = qtimers(g.cq)
if not timers then return fail('the compensation queue is not a queue of the run') end

addop(op)
redis.call('ZADD', timers, A.due, token('comp', n, vec, 0, A.attempt + 1, A.idx))
event('comp.retry', 0, 'x', x, 'idx', A.idx, 'attempt', A.attempt + 1, 'due', A.due, 'error', A.error)
ack()
return 'ok'
