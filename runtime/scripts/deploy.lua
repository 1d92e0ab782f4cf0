-- deploy: moves tag KEYS[1] (a list of versions, oldest first, each JSON
-- {version, hash, at, by}) to IR hash ARGV[1], unless it is there already.
-- ARGV: 1 hash, 2 now (ms), 3 by. Reply: the tag's current version record.
-- Stand-alone (no run keys): the IR itself is stored under its hash
-- before, with SET NX, and never changes.
local last = redis.call('LINDEX', KEYS[1], -1)
if last then
  local r = cjson.decode(last)
  if r.hash == ARGV[1] then return last end
end
local n = redis.call('LLEN', KEYS[1]) + 1
local rec = cjson.encode({version = n, hash = ARGV[1], at = tonumber(ARGV[2]), by = ARGV[3]})
redis.call('RPUSH', KEYS[1], rec)
return rec
