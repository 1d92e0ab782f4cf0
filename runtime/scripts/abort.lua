-- abort: fails a running run for a reason outside any node's handler: its
-- deadline passed (a deadline message) or a token exceeded max_hops.
-- A: gen, msg, reason, x (the execution concerned, or '').
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
if st ~= 'running' then ack(); return 'inactive' end
if A.gen ~= GEN then ack(); return 'stale' end
local op = 'a:' .. tostring(GEN)
if redis.call('SISMEMBER', APPLIED, op) == 1 then ack(); return 'dup' end

addop(op)
failrun(A.reason, A.x)
ack()
return 'ok'
