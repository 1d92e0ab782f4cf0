-- take: a worker's read of a batch together with what handling each message
-- reads first, in one round trip instead of two: XREADGROUP (not blocking)
-- on one shard's queue streams, then for each message that carries a token,
-- its run's meta (HGETALL, once per run) and, for an exec token, the
-- execution's state. It only reads (the XREADGROUP's delivery aside), so it
-- has no preconditions to check. The worker calls it while messages are
-- waiting; when none are, it blocks in XREADGROUP itself (a script cannot
-- block) and reads the rest with a pipeline.
-- KEYS: the queue streams of one shard (all carry the shard's hash tag, as
--       do the run keys read here, so the script stays in one slot).
-- ARGV: 1 group, 2 consumer, 3 count, 4 the shard's key tag ("prefix:{n}").
-- Reply: {messages, metas}. messages: for each message read (at most
--   count in all),
--   {stream index (1-based), id, t (false: none), run (false: no token),
--    exec key (false: not an exec token), state ('' when none)};
-- metas: {run, HGETALL of its meta} for each run named.
-- The count bounds the whole reply (one stream after the other), not each
-- stream as one XREADGROUP over all would: the worker has that many slots.
local msgs, metas = {}, {}
local left = tonumber(ARGV[3])
local seen = {}
local function str(v) return type(v) == 'string' and v ~= '' end
for si = 1, #KEYS do
  if left < 1 then break end
  local res = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', left, 'STREAMS', KEYS[si], '>')
  local got = res and res[1] and res[1][2] or {}
  left = left - #got
  for _, m in ipairs(got) do
    local t, run, x, st = false, false, false, false
    local f = m[2] or {}
    for i = 1, #f - 1, 2 do
      if f[i] == 't' then t = f[i + 1] end
    end
    if t then
      -- The fields are matched rather than decoded (cjson costs more):
      -- ids never hold quotes, and the worker decodes the token itself
      -- and uses what was read here only for the run and execution it
      -- finds there.
      local r = string.match(t, '"run":"([^"]*)"')
      -- Run ids are [A-Za-z0-9_.-], at most 128 (validRunID).
      if str(r) and #r <= 128 and not string.find(r, '[^%w_%.%-]') then
        run = r
        local base = ARGV[4] .. ':run:' .. run .. ':'
        if not seen[run] then
          seen[run] = true
          metas[#metas + 1] = {run, redis.call('HGETALL', base .. 'meta')}
        end
        local node = string.match(t, '"node":"([^"]*)"')
        if string.match(t, '"kind":"([^"]*)"') == 'exec' and str(node) then
          x = node
          local iter = string.match(t, '"iter":"([^"]*)"')
          if str(iter) then x = x .. '@' .. iter end
          st = redis.call('HGET', base .. 'state', x) or ''
        end
      end
    end
    msgs[#msgs + 1] = {si, m[1], t, run, x, st}
  end
end
return {msgs, metas}
