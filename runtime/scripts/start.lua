-- start: creates a run and queues its entry nodes.
-- A: ir, graph, workflow, inputs (JSON text), entries [[node, vec]],
--    deadline_ms, deadline_at (ms), max_hops, max_fanout, retention (ms the
--    run's keys are kept once it ends; 0 forever), parent (a child run of
--    a flow node, flow.go: {run, node, iter, hop, attempt, item, gen},
--    which its end notifies; KEYS then go on with the parent's state
--    hash; absent otherwise), recorder (a run that recorded this one as
--    its child without a flow node's link: an agent's delegated run,
--    agenttools.go; KEYS then go on with its state hash), admit (true: a new run that waits for
--    admission; KEYS then go on with the shard's admission hash and the
--    entry stream of each of A.queues).
if redis.call('HEXISTS', STATE, 'run|status') == 1 then return 'exists' end
-- A child run starts only while its parent records it (field
-- ch|<child>, written by the flow script, or for an agent's delegated
-- run by agentdelegate.lua, before the submit): a parent
-- that gives the child up before it started (its end, a join first, the
-- attempt's timeout) closes the record (flow.go's closeChildScript), and
-- the child then never starts ('unrecorded'). The parent's field
-- cp|<child> (pending) goes when it starts.
local PSTATE = (A.parent or A.recorder) and KEYS[7 + 2 * #A.queues]
if PSTATE and redis.call('HEXISTS', PSTATE, 'ch|' .. RUN) == 0 then return 'unrecorded' end
local info = redis.call('HGET', GRAPH, '_')
if not info then return fail('graph ' .. GRAPH .. ' is not stored') end
info = cjson.decode(info)
if not qstream(info.ctl) then return fail('the control queue is not a queue of the run') end
for _, e in ipairs(A.entries) do
  local g = gnode(e[1])
  if not g then return fail('unknown entry node ' .. e[1]) end
  if not qstream(g.q) then return fail('queue ' .. g.q .. ' is not a queue of the run') end
end
if A.admit and not KEYS[7 + 3 * #A.queues] then return fail('bad start call: no entry streams') end

-- run|graph first: the hash is a hashtable from the start (step.lua).
redis.call('HSET', STATE, 'run|graph', A.graph, 'run|status', 'running', 'run|gen', 0, 'run|ir', A.ir,
  'run|queues', table.concat(A.queues, ','), 'run|workflow', A.workflow, 'run|inputs', A.inputs, 'run|created', NOW,
  'run|deadline_ms', tostring(A.deadline_ms), 'run|max_hops', tostring(A.max_hops), 'run|max_fanout', tostring(A.max_fanout),
  'run|retention', tostring(A.retention or 0))
RET = tonumber(A.retention or 0) or 0
GSFX, MAXHOPS = A.graph, A.max_hops
if A.parent then
  -- run|aux: a run that ends in advance.lua leaves its end to complete,
  -- whose endrun notifies the parent.
  redis.call('HSET', STATE, 'run|parent', cjson.encode(A.parent), 'run|aux', '1')
  redis.call('HDEL', PSTATE, 'cp|' .. RUN)
  fold('run.started', 0, 'ir', A.ir, 'workflow', A.workflow, 'inputs', A.inputs,
    'parent', A.parent.run, 'parent_x', xkey(A.parent.node, A.parent.iter))
else
  if PSTATE then redis.call('HDEL', PSTATE, 'cp|' .. RUN) end
  fold('run.started', 0, 'ir', A.ir, 'workflow', A.workflow, 'inputs', A.inputs)
end
if A.admit then
  -- A new run waits for admission (docs/runtime.md, "Scheduling", and
  -- begin.lua): each entry token goes to its queue's entry stream, or to
  -- the queue's stream while an idle worker's credits last. A child run
  -- (A.parent) is work of a run in flight: its tokens go to the streams.
  local ADMIT, nk = KEYS[7 + 2 * #A.queues], 7 + 2 * #A.queues
  local mainstream = qstream
  for _, e in ipairs(A.entries) do
    local q = gnode(e[1]).q
    local to = KEYS[nk + QI[q]]
    if tonumber(redis.call('HGET', ADMIT, q) or '0') > 0 then
      redis.call('HINCRBY', ADMIT, q, -1)
      to = mainstream(q)
    end
    qstream = function() return to end -- where dispatch queues this entry
    dispatch(e[1], e[2], 1)
  end
  qstream = mainstream
else
  for _, e in ipairs(A.entries) do dispatch(e[1], e[2], 1) end
end
unfold()
if A.deadline_ms > 0 then
  redis.call('ZADD', qtimers(info.ctl), A.deadline_at, deadline_member())
end
settle()
return 'ok'
