-- decide: a decision on an approval (Engine.Decide) or its timeout (a
-- timeout token), or its escalation (an escalate token). This file is followed by complete.lua's body, which
-- makes the node's whole transition: decide checks that the approval is
-- open — the execution is waiting in the run's current generation — and
-- that the decider may decide, records the decision (field ad|x), closes
-- the approval in the shard's index and its timer, and sets A for
-- complete. Exactly one decision or timeout finds it open.
-- An escalation only marks the open approval escalated (field ae|x: the
-- time) and writes approval.escalated, once; from then on its escalate_to
-- approvers may decide too. It makes no transition: it returns before
-- complete's body.
-- A: node, iter, kind ('decision' | 'timeout' | 'escalate'), by, comment, outcome
--    ('approved' | 'rejected' | 'timed_out'), and complete's mode, output,
--    error, code, real, failrun, maxstate; msg with a timeout token.
-- A refused decision is an error reply, nothing written; a timeout or an
-- escalation that finds the approval closed (or escalated already)
-- acknowledges its message ('dup').
do
  local dst = header()
  if not dst then return fail('unknown run ' .. RUN) end
  if not checkmsg() then return fail('the message queue is not a queue of the run') end
  local dg = gnode(A.node)
  if not dg then return fail('unknown node ' .. A.node) end
  local dx = xkey(A.node, A.iter)
  -- timeout: a timer token (timeout or escalate), not a decision.
  local timeout = A.kind == 'timeout' or A.kind == 'escalate'
  if dst ~= 'running' then
    if timeout then ack(); return 'inactive' end
    return fail('run ' .. RUN .. ' is ' .. dst .. ': its approvals are closed')
  end
  if timeout and A.gen < GEN then ack(); return 'stale' end
  local rec = redis.call('HGET', STATE, 'ap|' .. dx)
  if not rec then
    if timeout then ack(); return 'dup' end
    return fail('no approval ' .. dx .. ' in run ' .. RUN)
  end
  local r = cjson.decode(rec)
  local cur = redis.call('HGET', STATE, dx)
  if cur ~= 'waiting' or tonumber(r.gen) ~= GEN then
    if timeout then ack(); return 'dup' end
    local d = redis.call('HGET', STATE, 'ad|' .. dx)
    if d then
      d = cjson.decode(d)
      if d.outcome == 'timed_out' then
        return fail('approval ' .. dx .. ' of run ' .. RUN .. ' is closed: it timed out')
      end
      if d.outcome == 'cancelled' then
        return fail('approval ' .. dx .. ' of run ' .. RUN .. ' is closed: it was cancelled (' .. d.comment .. ')')
      end
      return fail('approval ' .. dx .. ' of run ' .. RUN .. ' is closed: already ' .. d.outcome .. ' by ' .. d.by)
    end
    return fail('approval ' .. dx .. ' of run ' .. RUN .. ' is closed')
  end
  local escalated = redis.call('HGET', STATE, 'ae|' .. dx)
  if A.kind == 'escalate' then
    if escalated then ack(); return 'dup' end
    redis.call('HSET', STATE, 'ae|' .. dx, NOW)
    local to = type(r.escalate_to) == 'table' and r.escalate_to or {}
    event('approval.escalated', 0, 'x', dx, 'escalate_to', table.concat(to, ','))
    ack()
    return 'ok'
  end
  if not timeout and type(r.approvers) == 'table' and #r.approvers > 0 then
    local ok = false
    for _, a in ipairs(r.approvers) do if a == A.by then ok = true end end
    local to = type(r.escalate_to) == 'table' and r.escalate_to or {}
    local esc = false
    for _, a in ipairs(to) do if a == A.by then esc = true end end
    if not ok and esc and not escalated then
      local wait = math.max(math.ceil((tonumber(r.escalate_at) - tonumber(NOW)) / 1000), 0)
      return fail(cjson.encode(A.by) .. ' is an escalation approver of ' .. dx .. ': they may decide once it escalates (in ' .. wait ..
        's; approvers until then: ' .. table.concat(r.approvers, ', ') .. ')')
    end
    if not ok and not esc then
      local also = ''
      if #to > 0 then also = '; after escalation: ' .. table.concat(to, ', ') end
      return fail(cjson.encode(A.by) .. ' is not an approver of ' .. dx .. ' (approvers: ' .. table.concat(r.approvers, ', ') .. also .. ')')
    end
  end
  if A.mode == 'ok' and overstate(#A.output) then
    return fail('the decision\'s output of ' .. #A.output .. ' bytes would take the run\'s stored values over the limit of ' ..
      A.maxstate .. ' bytes (max_state_bytes)')
  end
  -- Writes: the decision, then complete's transition of the execution.
  local hop = tonumber(r.hop) or tonumber(redis.call('HGET', STATE, 'hop|' .. dx) or '1')
  redis.call('HSET', STATE, 'ad|' .. dx, cjson.encode({outcome = A.outcome, by = A.by, comment = A.comment, at = tonumber(NOW)}))
  redis.call('ZREM', KEYS[7 + 2 * #A.queues], RUN .. ' ' .. dx)
  redis.call('ZREM', qtimers(dg.q), token('timeout', A.node, A.iter, hop, 1, -1), token('escalate', A.node, A.iter, hop, 1, -1))
  event('approval.decided', 0, 'x', dx, 'outcome', A.outcome, 'by', A.by, 'comment', A.comment)
  A.gen, A.hop, A.item, A.loop, A.drop = GEN, hop, -1, false, false
end
