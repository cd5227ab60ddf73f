-- onelimit.lua: GCRA and the fixed window, one limit at a time, which
-- decide's fast paths (decide.lua) and a batch of one-limit requests
-- (one_pass in batch.lua) share. It comes first in the script. Times are
-- µs, as in decide.lua.

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

-- fixed_state returns the state of key k from v, GET's reply: the window
-- index and the count in it, 0 and 0 if the key is absent, or the error
-- reply of a value this script did not write.
local function fixed_state(k, v)
  if not v then return 0, 0 end
  if #v ~= 16 then return {err = 'SLUICE_CORRUPT bad length in key ' .. k} end
  local s1, s2 = struct.unpack('<dd', v)
  if s1 ~= s1 or s1 < 0 or s1 > 8e15 or s1 ~= math.floor(s1) or
    s2 ~= s2 or s2 < 0 or s2 > 8e15 or s2 ~= math.floor(s2) then
    return {err = 'SLUICE_CORRUPT bad word in key ' .. k}
  end
  return s1, s2
end

-- fixed decides a take of cost at now on the state (s1, s2) of a fixed
-- window of r per w, offset by off and adj (see decide.lua's arguments),
-- as algorithm.FixedWindow does: whether it is allowed, the remaining,
-- reset, retry and retry adjustment it gets, and the window index and
-- count before the take.
local function fixed(s1, s2, now, cost, r, w, off, adj)
  local t = now - off
  -- idx = ⌊t/w⌋, exact although t/w is rounded
  local idx = math.floor(t / w)
  if idx * w > t then idx = idx - 1 elseif (idx + 1) * w <= t then idx = idx + 1 end
  local count = s2
  if idx > s1 then count = 0 else idx = s1 end
  local e = (idx + 1) * w - t
  if e < 0 then e = 0 end
  if count + cost <= r then
    return true, r - count - cost, e, 0, 0, idx, count
  end
  local rem = r - count
  if rem < 0 then rem = 0 end
  return false, rem, e, e, adj, idx, count
end
