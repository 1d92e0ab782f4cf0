-- compdone: records one compensation of a failed run and queues the
-- previous one (compensations run in reverse completion order; a failed
-- compensation is recorded and the others still run).
-- A: gen, msg, idx, ok, output or error.
local x, op = compensating(A.idx)
if not x then return op end

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
