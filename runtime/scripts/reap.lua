-- reap: removes a dead worker's consumer from the consumer groups of the
-- given queue streams without losing a message. A worker is dead when its
-- registry record's last heartbeat (seen, ms) is more than its dead time
-- (dead, ms) before now; "force" (a worker's own graceful stop) skips that
-- check. XGROUP DELCONSUMER drops the consumer's pending entries, so it
-- runs only on a stream where the consumer has none (XPENDING with the
-- consumer filter, in the same script: a read cannot hand it one in
-- between). The record goes once no stream keeps the consumer.
-- KEYS: 1 the shard's worker registry, 2.. queue streams of the shard.
-- ARGV: 1 group, 2 consumer, 3 now (ms), 4 "force" or "".
-- Returns how many of the streams still have pending entries of it.
local group, consumer, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
if ARGV[4] ~= 'force' then
  local rec = redis.call('HGET', KEYS[1], consumer)
  if not rec then return -1 end
  local ok, r = pcall(cjson.decode, rec)
  if ok and type(r) == 'table' and now - (tonumber(r.seen) or 0) <= (tonumber(r.dead) or 0) then
    return -1
  end
end
local kept = 0
for i = 2, #KEYS do
  local p = redis.pcall('XPENDING', KEYS[i], group, '-', '+', 1, consumer)
  if type(p) == 'table' and not p.err then
    if #p == 0 then
      redis.call('XGROUP', 'DELCONSUMER', KEYS[i], group, consumer)
    else
      kept = kept + 1
    end
  end
end
if kept == 0 then redis.call('HDEL', KEYS[1], consumer) end
return kept
