-- gcra.lua: the GCRA of one limit, which decide's fast path (decide.lua)
-- and a batch of Limiters' requests (gcra_batch in batch.lua) share. It
-- comes first in the script. Times are µs, as in decide.lua.

-- gcra_state returns the state of key k from v, GET's reply: 0 if the
-- key is absent, else the stored time, or the error reply of a value
-- this script did not write.
local function gcra_state(k, v)
  if not v then return 0 end
  if #v ~= 8 then return {err = 'SLUICE_CORRUPT bad length in key ' .. k} end
  local tat = struct.unpack('<d', v)
  if tat ~= tat or tat < 0 or tat > 8e15 or tat ~= math.floor(tat) then
    return {err = 'SLUICE_CORRUPT bad word in key ' .. k}
  end
  return tat
end

-- gcra decides a take of cost at now on the state tat of a limit of
-- burst r and interval T, as algorithm.GCRA does: whether it is allowed,
-- the remaining, reset and retry it gets, and the state it leaves if
-- taken. math.floor of a quotient of exact integers below 2^53 is exact
-- here: a remainder is at least 1, far above the rounding error.
local function gcra(tat, now, cost, r, T)
  local tau = T * r
  local base = tat
  if now > base then base = now end
  local nxt = base + cost * T
  if nxt - now <= tau then
    return true, math.floor((now + tau - nxt) / T), nxt - now, 0, nxt
  end
  local room, reset, retry = now + tau - base, base - now, nxt - tau - now
  if room < 0 then room = 0 end
  if reset < 0 then reset = 0 end
  if retry < 0 then retry = 0 end
  return false, math.floor(room / T), reset, retry, nxt
end
