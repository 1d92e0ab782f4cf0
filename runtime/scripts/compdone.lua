-- compdone: records one compensation of a failed run and queues the
-- previous one (compensations run in reverse completion order; a failed
-- compensation is recorded and the others still run).
-- A: gen, msg, idx, ok, output or error.
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
if st ~= 'failed' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local op = 'k:' .. tostring(A.idx) .. ':' .. tostring(GEN)
if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return 'dup' end
if redis.call('HGET', STATE, 'run|comp') ~= 'running' then ack(); return 'dup' end
local x = redis.call('LINDEX', COMP, A.idx)
if not x then return fail('no compensation ' .. tostring(A.idx)) end

addop(op)
if A.ok then
  event('comp.completed', 0, 'x', x, 'idx', A.idx, 'output', A.output or '{}')
else
  event('comp.failed', 0, 'x', x, 'idx', A.idx, 'error', A.error or '')
end
if A.idx > 0 then
  compdispatch(A.idx - 1)
else
  redis.call('HSET', STATE, 'run|comp', 'done')
  event('comp.done', 0)
  endrun()
end
ack()
return 'ok'
