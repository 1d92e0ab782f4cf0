-- finish: ends a run whose work is done with its result, or fails it when
-- the workflow outputs could not be evaluated.
-- A: gen, msg, result (JSON text) or error, maxstate (lib.lua's
--    overstate: a result that does not fit fails the run).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local op = 'f:' .. tostring(GEN)
if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return 'dup' end

if A.result and not (A.error and A.error ~= '') and overstate(#A.result) then
  A.error = 'the result (' .. #A.result .. ' bytes) would take the run\'s stored values over the limit of ' ..
    A.maxstate .. ' bytes (max_state_bytes)'
end

addop(op)
redis.call('HINCRBY', STATE, COUNTER, -1)
if A.error and A.error ~= '' then
  event('run.outputs_failed', -1, 'error', A.error)
  failrun(A.error, nil)
else
  addbytes(#A.result)
  redis.call('HSET', STATE, 'run|status', 'completed', 'run|result', A.result, 'run|ended', NOW)
  local info = graphinfo()
  redis.call('ZREM', qtimers(info.ctl), deadline_member())
  event('run.completed', -1, 'result', A.result)
  endrun()
end
ack()
return 'ok'
