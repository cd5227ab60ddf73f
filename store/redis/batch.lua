-- batch.lua: the entry of the script the Store runs, after the function
-- decide of decide.lua. A call decides one request, or, when its first
-- argument is "b", a batch of several: each decided on its own, in turn.
-- The requests of a batch are independent: one over its limit, or
-- failing, changes nothing for the others (not all-or-nothing). Those
-- without a time of their own are decided at one reading of the server's
-- TIME, taken when the call starts: reading it costs Redis about as much
-- as a small decision.
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

-- A holds the numbers of the request being decided and W decide's
-- scratch space, refilled for each: tables of the call, not built anew
-- for each request.
local A, W = {}, {{}, {}, {}}
local t = redis.call('TIME')
local tnow = tonumber(t[1]) * 1000000 + tonumber(t[2])
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
