-- agentrecord: records an agent execution's decision once (docs/agents.md,
-- "Exactly one decision"). KEYS[1] the run's state hash; ARGV[1] the field
-- (ag|<exec key>), ARGV[2] the decision (JSON).
-- Returns the recorded decision: this one, or the one an earlier delivery
-- of the same execution recorded (which then wins); false when the run is
-- no longer running (nothing is written: the hash of an ended run, or of a
-- deleted one, must not be recreated).
if redis.call('HGET', KEYS[1], 'run|status') ~= 'running' then
  return false
end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  return ARGV[2]
end
return redis.call('HGET', KEYS[1], ARGV[1])
