-- agentdelegate: records a run an agent delegated (delegate_to_agent) as a
-- child of the delegating run (docs/agents.md, "Tools"), before it is
-- submitted: field ch|<child> -> the agent's execution, and run|kids, so
-- that the run's cancel and the orphans token of its end cancel the child
-- as they do a flow node's; and run|aux, so that the run's end goes
-- through complete.lua's endrun, which queues that token (advance.lua
-- leaves such an end to it). The record is pending (cp|<child>) until
-- start.lua starts the child, which it does only while the record stands
-- (docs/agents.md, and flow.go's "Between the record and the submit"): a
-- worker that dies between the record and the submit leaves a pending
-- record, which status does not show and the run's end closes. KEYS[1]
-- the run's state hash; ARGV[1] the child run id (in the run's shard, so
-- that start.lua reads this hash), ARGV[2] the execution.
-- Returns 1, or 0 when the run is no longer running (nothing is written:
-- the child must not be started).
if redis.call('HGET', KEYS[1], 'run|status') ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'ch|' .. ARGV[1], ARGV[2], 'cp|' .. ARGV[1], '1', 'run|kids', '1', 'run|aux', '1')
return 1
