-- release: gives a message back at once (graceful stop): acknowledges it
-- and adds the same token again, unless it was acknowledged already.
-- KEYS: 1 stream. ARGV: 1 group, 2 message id, 3 token.
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call('XADD', KEYS[1], '*', 't', ARGV[3])
  return 1
end
return 0
