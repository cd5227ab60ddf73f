-- onelimit.lua: GCRA and the fixed window, one limit at a time, which
-- decide (its fast paths and its general code, decide.lua) and a batch
-- of one-limit requests (one_pass in batch.lua) share. It comes first
-- in the script. Times are µs, as in decide.lua.

-- MAXW bounds every stored word, so that a word plus a period and a
-- burst stays an exact double.
local MAXW = 8e15

-- bad_word reports whether x, read from a key, is not a word this script
-- writes: a whole number from 0 to MAXW.
local function bad_word(x)
  return x ~= x or x < 0 or x > MAXW or x ~= math.floor(x)
end

-- fdiv is ⌊a/b⌋ for b > 0, exact although a/b is rounded.
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- gcra_state returns the state of key k from v, GET's reply: 0 if the
-- key is absent, else the stored time, or the error reply of a value
-- this script did not write.
local function gcra_state(k, v)
  if not v then return 0 end
  if #v ~= 8 then return {err = 'SLUICE_CORRUPT bad length in key ' .. k} end
  local tat = struct.unpack('<d', v)
  if bad_word(tat) then
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
  if bad_word(s1) or bad_word(s2) then
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
  local idx = fdiv(t, w)
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
