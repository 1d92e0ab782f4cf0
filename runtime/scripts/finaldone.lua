-- finaldone: records the workflow's finally step — its handler succeeded
-- or failed for good — and lets the run's keys expire (lib.lua's endrun
-- queued it and held the expiry back).
-- A: gen, msg, ok, output or error.
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
if A.gen < GEN then ack(); return 'stale' end
if redis.call('HGET', STATE, 'run|finally') ~= 'running' then ack(); return 'dup' end

if A.ok then
  redis.call('HSET', STATE, 'run|finally', 'done')
  event('finally.done', 0, 'output', A.output or '{}')
else
  redis.call('HSET', STATE, 'run|finally', 'failed', 'run|finally_error', A.error or '')
  event('finally.failed', 0, 'error', A.error or '')
end
expirekeys()
ack()
return 'ok'
