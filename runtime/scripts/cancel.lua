-- cancel: stops a running run. Tokens still queued are dropped when a
-- worker sees them; no compensation runs.
-- A: reason.
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if st ~= 'running' then return fail('run ' .. RUN .. ' is ' .. st .. ', not running') end
local op = 'x:' .. tostring(GEN)
if redis.call('SISMEMBER', APPLIED, op) == 1 then return 'dup' end

addop(op)
redis.call('HSET', STATE, 'run|status', 'cancelled', 'run|ended', NOW, 'run|error', A.reason)
local info = graphinfo()
redis.call('ZREM', qtimers(info.ctl), deadline_member())
event('run.cancelled', 0, 'reason', A.reason)
endrun()
return 'ok'
