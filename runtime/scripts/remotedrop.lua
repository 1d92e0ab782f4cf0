-- remotedrop: removes a lease once its completion was handled, unless
-- another worker holds the task now (remote.go).
-- KEYS: 1 lease key. ARGV: 1 the lease's hash.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
