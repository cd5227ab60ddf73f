-- batch.lua: the entry of the script the Store runs, after the function
-- decide of decide.lua. A call decides one request, or, when its first
-- argument is "b", a batch of several: each decided on its own, in turn.
-- The requests of a batch are independent: one over its limit, or
-- failing, changes nothing for the others (not all-or-nothing). Those
-- without a time of their own are decided at one reading of the server's
-- TIME, taken when the call starts: reading it costs Redis about as much
-- as a small decision. A batch of takes and peeks under one GCRA limit
-- or fixed window each, what Limiters and the service's rules send, is
-- decided in one pass (one_pass), which costs Redis a quarter less per
-- decision than a decide each.
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

-- one_pass decides a batch whose every request is a take or peek under
-- one limit, a GCRA or a fixed window, packed (what Limiters and the
-- service's rules send): the replies a call each would get, in their
-- order, for less. One MGET reads every key; each key's state is kept in
-- tables as the batch goes, so that a request sees the takes before it
-- on its key; each key taken from is written once at the end, with its
-- last take's state and expiry (what the last of a call each would
-- leave). The algorithms are onelimit.lua's, as in decide's fast paths.
-- It returns nil, having written nothing, if a key MGET found empty
-- exists: a value of another type, which the per-request path reports as
-- GET does.
local function one_pass(tnow)
  local vals = redis.call('MGET', unpack(KEYS))
  local absent = {}
  for i = 1, #KEYS do
    if not vals[i] then absent[#absent + 1] = KEYS[i] end
  end
  if #absent > 0 and redis.call('EXISTS', unpack(absent)) > 0 then return nil end
  local s1s, s2s, pxs, out = {}, {}, {}, {}
  for i = 1, #KEYS do
    local k = KEYS[i]
    local op, cost, now, _, slack, alg, r, p, _, _, off, adj = struct.unpack('<dddddddddddd', ARGV[i + 1])
    if now < 0 then now = tnow end
    local s1, s2 = s1s[k], s2s[k]
    if s1 == nil then
      if alg == 0 then s1 = gcra_state(k, vals[i]) else s1, s2 = fixed_state(k, vals[i]) end
      s1s[k], s2s[k] = s1, s2
    end
    if type(s1) == 'table' then
      out[i] = s1
    elseif alg == 0 then
      local a, rem, reset, retry, nxt = gcra(s1, now, cost, r, p)
      if a and op == 0 then
        s1s[k], pxs[k] = nxt, math.max(math.ceil(reset / 1000) + slack, 1)
      end
      out[i] = struct.pack('<dddddddd', a and 1 or 0, 1, rem, reset, retry, now, 0, 0)
    else
      local a, rem, e, retry, retryadj, idx, count = fixed(s1, s2, now, cost, r, p, off, adj)
      if a and op == 0 then
        s1s[k], s2s[k], pxs[k] = idx, count + cost, math.max(math.ceil(e / 1000) + slack, 1)
      end
      out[i] = struct.pack('<dddddddd', a and 1 or 0, 1, rem, e, retry, now, adj, retryadj)
    end
  end
  for k, px in pairs(pxs) do
    local v
    if s2s[k] then v = struct.pack('<dd', s1s[k], s2s[k]) else v = struct.pack('<d', s1s[k]) end
    redis.call('SET', k, v, 'PX', px)
  end
  return out
end

local t = redis.call('TIME')
local tnow = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- A batch of takes and peeks, one GCRA or fixed window each: see
-- one_pass. Read from the top bytes of the doubles op and alg, without
-- unpacking: 0 and 1 have one below 0x40 (2.0 is 0x40...).
local lean = #KEYS == #ARGV - 1
for i = 2, #ARGV do
  if not lean then break end
  local s = ARGV[i]
  lean = #s == 96 and s:byte(8) < 0x40 and s:byte(48) < 0x40
end
if lean then
  local out = one_pass(tnow)
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
