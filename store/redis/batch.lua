-- batch.lua: the entry of the script the Store runs, after the function
-- decide of decide.lua. A call decides one request, with decide.lua's
-- keys and arguments, or, when its first argument is "b", a batch of
-- several: each decided on its own, in turn. The requests of a batch are
-- independent: one over its limit, or failing, changes nothing for the
-- others (not all-or-nothing). Those without a time of their own are
-- decided at one reading of the server's TIME, taken when the call
-- starts: reading it costs Redis about as much as a small decision.
--
-- KEYS     every request's keys, in request order.
-- ARGV     "b", then for each request: its number of keys n, then its
--          5 + 7n arguments of decide.lua.
-- Returns  decide's reply for one request; for a batch, one element per
--          request: decide's reply, or the error reply it raised (a
--          corrupt key, a key of another type).

if ARGV[1] ~= 'b' then
  return decide(0, 0, #KEYS, -1)
end

local t = redis.call('TIME')
local tnow = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out, kb, ab, n = {}, 0, 1, #ARGV
while ab < n do
  local nk = tonumber(ARGV[ab + 1])
  local ok, res = pcall(decide, kb, ab + 1, nk, tnow)
  if not ok then
    -- decide's own errors and redis.call's are tables, Lua's strings
    if type(res) == 'table' then res = res.err end
    res = {err = tostring(res)}
  end
  out[#out + 1] = res
  kb, ab = kb + nk, ab + 6 + 7 * nk
end
return out
