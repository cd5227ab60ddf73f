-- batch.lua: the entry of the script the Store runs, after the function
-- decide of decide.lua. A call decides one request, or, when its first
-- argument is "b", a batch of several: each decided on its own, in turn.
-- The requests of a batch are independent: one over its limit, or
-- failing, changes nothing for the others (not all-or-nothing). Those
-- without a time of their own are decided at one reading of the server's
-- TIME, taken when the call starts: reading it costs Redis about as much
-- as a small decision. A batch of takes and peeks under one GCRA limit
-- each, what Limiters send, is decided in one pass (gcra_batch), which
-- costs Redis a quarter less per decision than a decide each.
--
-- A request comes in one of two forms:
--
--   text    decide.lua's 5 + 7n arguments as decimal strings, for tools
--           and people (redis-cli, redis-benchmark);
--   packed  one argument holding the same 5 + 7n numbers as little-endian
--           doubles, which is what the Store sends: one argument instead
--           of twelve or more, which Redis parses and makes a Lua string
--           of once, not twelve times, and no decimals to parse, cost
--           Redis 12-17% less CPU per decision in batches of ten.
--
-- KEYS     every request's keys, in request order.
-- ARGV     one request as text; or "p" and one packed request; or "b" and
--          one packed request per request of the batch (each request's
--          number of keys n follows from its length).
-- Returns  decide's reply for one request; for a batch, one element per
--          request: decide's reply, or the error reply it raised (a
--          corrupt key, a key of another type).

-- numbers reads a packed request into the table A and returns its number
-- of keys, or raises an error if s is not one.
local function numbers(s, A)
  local m = #s / 8
  local nk = (m - 5) / 7
  if nk < 1 or nk ~= math.floor(nk) then
    error({err = 'ERR sluice: a packed request of ' .. #s .. ' bytes'})
  end
  if m == 12 then -- one limit, the most common policy
    A[1], A[2], A[3], A[4], A[5], A[6], A[7], A[8], A[9], A[10], A[11], A[12] =
      struct.unpack('<dddddddddddd', s)
    return 1
  end
  -- struct.unpack returns its values on Lua 5.1's C stack, which holds
  -- at most 8000: a chunk at a time.
  for first = 1, m, 1000 do
    local c = math.min(1000, m - first + 1)
    local v = {struct.unpack('<' .. string.rep('d', c), s, (first - 1) * 8 + 1)}
    for i = 1, c do A[first + i - 1] = v[i] end
  end
  return nk
end

local mode = ARGV[1]
if mode == 'p' then
  local A = {}
  local nk = numbers(ARGV[2], A)
  return decide(0, A, nk, -1)
elseif mode ~= 'b' then
  return decide(0, ARGV, #KEYS, -1)
end

-- gcra_batch decides a batch whose every request is a take or peek under
-- one GCRA limit, packed (what Limiters send): the replies a call each
-- would get, in their order, for less. One MGET reads every key; each
-- key's state is kept in a table as the batch goes, so that a request
-- sees the takes before it on its key; each key taken from is written
-- once at the end, with its last take's state and expiry (what the last
-- of a call each would leave). The GCRA is gcra.lua's, as in decide's
-- fast path. It returns nil, having written nothing, if a key MGET found
-- empty exists: a value of another type, which the per-request path
-- reports as GET does.
local function gcra_batch(tnow)
  local vals = redis.call('MGET', unpack(KEYS))
  local absent = {}
  for i = 1, #KEYS do
    if not vals[i] then absent[#absent + 1] = KEYS[i] end
  end
  if #absent > 0 and redis.call('EXISTS', unpack(absent)) > 0 then return nil end
  local tats, pxs, out = {}, {}, {}
  for i = 1, #KEYS do
    local k = KEYS[i]
    local op, cost, now, _, slack, _, r, T = struct.unpack('<dddddddd', ARGV[i + 1])
    if now < 0 then now = tnow end
    local tat = tats[k]
    if tat == nil then
      tat = gcra_state(k, vals[i])
      tats[k] = tat
    end
    if type(tat) == 'table' then
      out[i] = tat
    else
      local a, rem, reset, retry, nxt = gcra(tat, now, cost, r, T)
      if a and op == 0 then
        local px = math.ceil(reset / 1000) + slack
        if px < 1 then px = 1 end
        tats[k], pxs[k] = nxt, px
      end
      out[i] = struct.pack('<dddddddd', a and 1 or 0, 1, rem, reset, retry, now, 0, 0)
    end
  end
  for k, px in pairs(pxs) do
    redis.call('SET', k, struct.pack('<d', tats[k]), 'PX', px)
  end
  return out
end

local t = redis.call('TIME')
local tnow = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- A batch of GCRA takes and peeks, one limit each: see gcra_batch. Read
-- from the top bytes of the doubles op and alg, without unpacking: the
-- op is 0 or 1 if that byte is below 0x40 (2.0 is 0x40...), the
-- algorithm 0 (GCRA) if it is 0.
local lean = #KEYS == #ARGV - 1
for i = 2, #ARGV do
  if not lean then break end
  local s = ARGV[i]
  lean = #s == 96 and s:byte(8) < 0x40 and s:byte(48) == 0
end
if lean then
  local out = gcra_batch(tnow)
  if out then return out end
end

-- A holds the numbers of the request being decided and W decide's
-- scratch space, refilled for each: tables of the call, not built anew
-- for each request.
local A, W = {}, {{}, {}, {}}
local out, kb = {}, 0
for i = 2, #ARGV do
  local nk = numbers(ARGV[i], A)
  local ok, res = pcall(decide, kb, A, nk, tnow, W)
  if not ok then
    -- decide's own errors and redis.call's are tables, Lua's strings
    if type(res) == 'table' then res = res.err end
    res = {err = tostring(res)}
  end
  out[#out + 1] = res
  kb = kb + nk
end
return out
