-- agentrecord: records an agent execution's decision once (docs/agents.md,
-- "Exactly one decision"). KEYS[1] the run's state hash; ARGV[1] the field
-- (ag|<exec key>), ARGV[2] the decision (JSON), ARGV[3] the run's
-- max_state_bytes (0: none).
-- Returns the recorded decision: this one, or the one an earlier delivery
-- of the same execution recorded (which then wins); false when the run is
-- no longer running (nothing is written: the hash of an ended run, or of a
-- deleted one, must not be recreated); 0 when the decision would take the
-- run's stored values (run|bytes, lib.lua) over max_state_bytes (nothing is
-- written). A record is a value the run stores: its bytes count in
-- run|bytes, once, when written (the node's output, written by complete,
-- counts again).
if redis.call('HGET', KEYS[1], 'run|status') ~= 'running' then
  return false
end
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if rec then return rec end
local max, n = tonumber(ARGV[3]) or 0, #ARGV[2]
if max > 0 and tonumber(redis.call('HGET', KEYS[1], 'run|bytes') or '0') + n > max then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[1], 'run|bytes', n)
return ARGV[2]
