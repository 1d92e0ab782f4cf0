-- remotebeat: extends the lease of a task leased to an external worker
-- (remote.go). KEYS: 1 stream, 2 lease key, 3 the shard's task deadlines.
-- ARGV: 1 group, 2 message id, 3 the lease's hash, 4 lease ms, 5 the
-- task's deadline member, 6 now (ms).
-- Replies: the consumer holding the message (the lease is extended and
-- the message's idle time reset, so that no other poller claims it);
-- 0: the lease is not this one (it expired or another worker holds the
-- task now); -1: the message is no longer pending (done); -2: the task's
-- deadline (its node's timeout) passed: nothing is extended, the caller
-- fails the task.
if redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 then
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[5])
  return -1
end
local due = redis.call('ZSCORE', KEYS[3], ARGV[5])
if due and tonumber(due) <= tonumber(ARGV[6]) then return -2 end
-- As heartbeat.lua: RETRYCOUNT keeps the delivery count as it is.
redis.call('XCLAIM', KEYS[1], ARGV[1], p[1][2], 0, ARGV[2], 'RETRYCOUNT', p[1][4], 'JUSTID')
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return p[1][2]
