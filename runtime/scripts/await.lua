-- await: a worker reached a human node (docs/waiting.md): the execution
-- waits for a decision. It records the approval (field ap|x: the JSON
-- record the worker built), indexes it in the shard's open approvals
-- (KEYS[7 + 2 * #queues], a sorted set of "run x" by creation time),
-- schedules its timeout (a token of kind timeout in the node queue's
-- timers) and its escalation (a token of kind escalate) and acknowledges the exec message without completing the
-- execution: its counter unit stays held, so the run stays running while
-- no worker holds anything for it.
-- A: node, iter, hop, gen, msg, record (JSON text), id, approvers (comma
--    separated, for the event), prompt, due (ms; 0: no timeout),
--    escalate_to (comma separated), escalate (ms; 0: no escalation), maxstate
--    (lib.lua's overstate: 'state', writing nothing, when the record does
--    not fit).
local st = header()
if not st then return fail('unknown run ' .. RUN) end
if not checkmsg() then return fail('the message queue is not a queue of the run') end
local g = gnode(A.node)
if not g then return fail('unknown node ' .. A.node) end
local x = xkey(A.node, A.iter)
if st ~= 'running' then ack(); return 'inactive' end
if A.gen < GEN then ack(); return 'stale' end
local cur = redis.call('HGET', STATE, x)
if cur ~= 'queued' and cur ~= 'running' and cur ~= 'retrying' then ack(); return 'dup' end
if overstate(#A.record) then return 'state' end

addbytes(#A.record)
redis.call('HSET', STATE, x, 'waiting', 'ap|' .. x, A.record)
redis.call('HDEL', STATE, 'ad|' .. x, 'ae|' .. x)
redis.call('ZADD', KEYS[7 + 2 * #A.queues], NOW, RUN .. ' ' .. x)
if A.due > 0 then
  redis.call('ZADD', qtimers(g.q), A.due, token('timeout', A.node, A.iter, A.hop, 1, -1))
end
if A.escalate > 0 then
  redis.call('ZADD', qtimers(g.q), A.escalate, token('escalate', A.node, A.iter, A.hop, 1, -1))
  event('approval.created', 0, 'x', x, 'id', A.id, 'approvers', A.approvers, 'prompt', A.prompt, 'due', A.due,
    'escalate_to', A.escalate_to, 'escalate_at', A.escalate)
else
  event('approval.created', 0, 'x', x, 'id', A.id, 'approvers', A.approvers, 'prompt', A.prompt, 'due', A.due)
end
ack()
return 'ok'
