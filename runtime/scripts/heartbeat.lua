-- heartbeat: resets the idle time of a message this consumer still owns,
-- so that XAUTOCLAIM does not hand a long-running execution to another
-- worker. KEYS: 1 stream. ARGV: 1 group, 2 consumer, 3 message id.
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #p == 0 then return 0 end
-- RETRYCOUNT keeps the delivery count as it is: Redis does not count a
-- JUSTID claim as a delivery, but the embedded server does, and a long
-- handler's heartbeats would make its message look poisoned.
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'RETRYCOUNT', p[1][4], 'JUSTID')
return 1
