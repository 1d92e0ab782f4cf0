-- promote: moves due timer entries of one queue into its stream.
-- KEYS: 1 timers, 2 stream. ARGV: 1 now (ms), 2 max entries.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('XADD', KEYS[2], '*', 't', m)
end
return #due
