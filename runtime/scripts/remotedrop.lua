-- remotedrop: removes a lease once its completion was handled, unless
-- another worker holds the task now, and the lease's deadline (remote.go).
-- KEYS: 1 lease key, 2 the shard's task deadlines. ARGV: 1 the lease's
-- hash, 2 its deadline member.
redis.call('ZREM', KEYS[2], ARGV[2])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
