-- decide.lua: one request of package sluice against every limit of a policy,
-- all-or-nothing. It mirrors package algorithm exactly, in microseconds
-- instead of nanoseconds: Redis 7.0 runs Lua 5.1, whose numbers are
-- doubles, exact for integers below 2^53 (year 2255 in µs).
--
-- This file is the body of
--
--   local function decide(kb, A, nk, tnow, W)
--
-- which decides the request whose nk keys are KEYS[kb+1..kb+nk] and whose
-- arguments are A[1..] (ARGV, whose arguments are decimal strings, or the
-- numbers of a packed request: see batch.lua), reading TIME for its time
-- if it has none and tnow is -1, or taking tnow (µs). W, if not nil,
-- holds three tables the fast paths below fill as scratch space, so that
-- a batch does not build three per request. In the script the Store
-- runs, batch.lua follows it and calls it for the request of a call, or
-- for each request of a batch. Below, KEYS[i] means the request's own:
-- KEYS[kb+i].
--
-- KEYS[i]  state of limit i: packed little-endian doubles, the words of
--          algorithm.Words in µs, absent = empty state.
-- A        op (0 take, 1 peek, 2 refund, 3 reset, 4 insert), cost (an
--          insert's is negative for a reward), now µs (-1: the
--          server's TIME), at µs (refund), TTL slack in ms, then seven
--          values per limit: algorithm (0 gcra, 1 fixed, 2 sliding,
--          3 approx, 4 log), r (GCRA: MaxBurst; others: Rate), p (GCRA:
--          interval; others: period), g (sub-windows), b (sub-window
--          width), off (staggered window offset, rounded up to a µs) and
--          adj (what that rounding added, in ns).
-- Returns  allowed, binding limit (1-based), remaining, reset µs,
--          retry µs, now µs, reset adj ns, retry adj ns, packed as eight
--          little-endian doubles in one string (one bulk reply costs
--          Redis and the client less than an array of eight integers,
--          and a batch's reply holds one per request); for a refund or
--          a reset, those a peek just after it gets (of cost, or of 1). A
--          duration is its µs less its adj, so that a staggered window's
--          end and an approximate window's retry, which fall between
--          microseconds, come out exact in ns. Or it raises the error
--          reply "SLUICE_CORRUPT ..." when a key holds a value this script
--          did not write. Every read of a stored value comes before the first
--          write, so an error writes nothing.

local op = tonumber(A[1])
local cost = tonumber(A[2])
local now = tonumber(A[3])
local at = tonumber(A[4])
local slack = tonumber(A[5])
if now < 0 then
  now = tnow
  if now < 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
end

-- A reset answers what a peek of 1 just after it gets (see sluice.Store):
-- it deletes the keys and goes on as that peek.
if op == 3 then
  redis.call('DEL', unpack(KEYS, kb + 1, kb + nk))
  op, cost = 1, 1
end

-- Fast path for a take or peek under GCRA limits only, the default
-- algorithm: the general code below builds some thirty closures and
-- tables per call, which costs more than the GCRA arithmetic. Same
-- semantics, same replies.
local fast = op < 2
for i = 1, nk do
  if tonumber(A[6 + (i - 1) * 7]) ~= 0 then fast = false break end
end
if fast then
  local ok, bi, brem, breset, bretry
  local nexts, resets
  if W then nexts, resets = W[1], W[2] else nexts, resets = {}, {} end
  for i = 1, nk do
    local k = KEYS[kb + i]
    local tat = gcra_state(k, redis.call('GET', k))
    if type(tat) == 'table' then error(tat) end
    local j = 6 + (i - 1) * 7
    local a, rem, reset, retry, nxt = gcra(tat, now, cost, tonumber(A[j + 1]), tonumber(A[j + 2]))
    nexts[i], resets[i] = nxt, reset
    local binds
    if i == 1 then binds = true
    elseif a ~= ok then binds = not a
    elseif not a then binds = retry > bretry
    else binds = rem < brem end
    if binds then ok, bi, brem, breset, bretry = a, i, rem, reset, retry end
  end
  if op == 0 and ok then
    for i = 1, nk do
      local px = math.ceil(resets[i] / 1000) + slack
      if px < 1 then px = 1 end
      redis.call('SET', KEYS[kb + i], struct.pack('<d', nexts[i]), 'PX', px)
    end
  end
  return struct.pack('<dddddddd', ok and 1 or 0, bi, brem, breset, bretry, now, 0, 0)
end

-- Fast path for a take or peek under fixed windows only, the algorithm
-- of envoyproxy/ratelimit's configurations: fixed (onelimit.lua) for
-- each, without the general code's tables of closures below. Same
-- semantics, same replies.
fast = op < 2
for i = 1, nk do
  if tonumber(A[6 + (i - 1) * 7]) ~= 1 then fast = false break end
end
if fast then
  local ok, bi, brem, breset, bretry, bresetadj, bretryadj
  local idxs, counts, resets
  if W then idxs, counts, resets = W[1], W[2], W[3] else idxs, counts, resets = {}, {}, {} end
  for i = 1, nk do
    local k = KEYS[kb + i]
    local j = 6 + (i - 1) * 7
    local adj = tonumber(A[j + 6])
    local s1, s2 = fixed_state(k, redis.call('GET', k))
    if type(s1) == 'table' then error(s1) end
    local a, rem, e, retry, retryadj, idx, count =
      fixed(s1, s2, now, cost, tonumber(A[j + 1]), tonumber(A[j + 2]), tonumber(A[j + 5]), adj)
    idxs[i], counts[i], resets[i] = idx, count, e
    local binds
    if i == 1 then binds = true
    elseif a ~= ok then binds = not a
    elseif not a then binds = retry > bretry or (retry == bretry and retryadj < bretryadj)
    else binds = rem < brem end
    if binds then ok, bi, brem, breset, bretry, bresetadj, bretryadj = a, i, rem, e, retry, adj, retryadj end
  end
  if op == 0 and ok then
    for i = 1, nk do
      local px = math.ceil(resets[i] / 1000) + slack
      if px < 1 then px = 1 end
      redis.call('SET', KEYS[kb + i], struct.pack('<dd', idxs[i], counts[i] + cost), 'PX', px)
    end
  end
  return struct.pack('<dddddddd', ok and 1 or 0, bi, brem, breset, bretry, now, bresetadj, bretryadj)
end

local floor, max, min = math.floor, math.max, math.min
local pack, unpack1 = struct.pack, struct.unpack

local function corrupt(k, why)
  error({err = 'SLUICE_CORRUPT ' .. why .. ' in key ' .. k})
end

local function word(k, x)
  if bad_word(x) then corrupt(k, 'bad word') end
  return x
end

-- CHUNK bounds the values one struct call packs or unpacks: Lua 5.1's
-- C stack holds at most 8000.
local CHUNK = 1000

-- decode returns the n words packed in v.
local function decode(k, v, n)
  local w, pos = {}, 1
  for first = 1, n, CHUNK do
    local m = min(CHUNK, n - first + 1)
    local part = {unpack1('<' .. string.rep('d', m), v, pos)}
    pos = part[m + 1]
    for j = 1, m do w[first + j - 1] = word(k, part[j]) end
  end
  return w
end

local function zeros(n)
  local w = {}
  for i = 1, n do w[i] = 0 end
  return w
end

local function encode(w)
  local n, parts = #w, {}
  for first = 1, n, CHUNK do
    local last = min(first + CHUNK - 1, n)
    parts[#parts + 1] = pack('<' .. string.rep('d', last - first + 1), unpack(w, first, last))
  end
  return table.concat(parts)
end

---------------------------------------------------------------- GCRA

local function gcra_check(l, s, t)
  local a, rem, reset, retry = gcra(s[1], t, cost, l.r, l.p)
  return a, rem, reset, retry, 0, 0
end

local function gcra_commit(l, s, t)
  s[1] = max(s[1], t) + cost * l.p
end

local function gcra_refund(l, s, a, t)
  if s[1] > t then s[1] = max(s[1] - cost * l.p, t) end
end

---------------------------------------------------------------- fixed window

local function fixed_check(l, s, t)
  local a, rem, e, retry, retryadj = fixed(s[1], s[2], t, cost, l.r, l.p, 0, l.adj)
  return a, rem, e, retry, l.adj, retryadj
end

local function fixed_commit(l, s, t)
  local idx = fdiv(t, l.p)
  if idx > s[1] then s[1], s[2] = idx, 0 end
  s[2] = s[2] + cost
end

local function fixed_refund(l, s, a, t)
  if fdiv(a, l.p) == s[1] then s[2] = max(s[2] - cost, 0) end
end

---------------------------------------------------------------- sliding window

-- slot is the Lua index of bucket i's counter in the ring of g+1.
local function slot(g, i)
  return 2 + (i - fdiv(i, g + 1) * (g + 1))
end

local function sliding_view(l, s, t)
  local g, newest = l.g, s[1]
  local c = max(fdiv(t, l.b), newest)
  local full, old = 0, 0
  for i = max(c - g, newest - g), newest do
    if i == c - g then old = s[slot(g, i)] else full = full + s[slot(g, i)] end
  end
  return c, full, old
end

local function sliding_count(l, c, full, old, t)
  if l.a == 2 or old == 0 then return full + old end
  local b = l.b
  local overlap = min(max((c - l.g + 1) * b - (t - l.p), 0), b)
  return full + old * overlap / b
end

local function sliding_reset(l, s, t, taken)
  local g, b = l.g, l.b
  local c = sliding_view(l, s, t)
  local newest
  if taken then
    newest = c
  else
    for i = s[1], max(s[1] - g, c - g), -1 do
      if s[slot(g, i)] ~= 0 then newest = i break end
    end
  end
  if newest == nil then return 0 end
  return max((newest + g + 1) * b - t, 0)
end

-- sliding_refine returns how many ns before lo µs the take first fits,
-- lo-1 µs not fitting: the reference bisects in ns, and an approximate
-- window's count falls continuously. c, full and old describe the bucket
-- that holds the instants just before lo. d ns before lo, the overlap of
-- the oldest bucket is d ns longer.
local function sliding_refine(l, c, full, old, lo)
  local b = l.b
  local base = ((c - l.g + 1) * b - (lo - l.p)) * 1000
  local bn = b * 1000
  local dlo, dhi = 0, 999
  while dlo < dhi do
    local mid = dlo + floor((dhi - dlo + 1) / 2)
    local overlap = min(max(base + mid, 0), bn)
    if full + old * overlap / bn + cost <= l.r then dlo = mid else dhi = mid - 1 end
  end
  return dlo
end

-- sliding_meets returns about when, in µs, within bucket c, an
-- approximate window's count of full and old falls to where a take of
-- cost fits: the count falls by old/b a µs as the oldest bucket's overlap
-- shrinks, so the overlap may be at most (rate-cost-full)*b/old.
local function sliding_meets(l, c, full, old)
  local b = l.b
  local over = min(max(floor((l.r - cost - full) * b / old), 0), b)
  return (c - l.g + 1) * b + l.p - over
end

-- sliding_retry_at returns the earliest time, in µs less ns, at which a
-- take of cost fits, if nothing else is taken meanwhile. The count only
-- falls as time passes, so it walks forward bucket by bucket, keeping
-- full and old up to date, and bisects within the first bucket where the
-- take fits, as the reference does: within a few µs of where the count
-- meets the rate (sliding_meets), or at lo when it met it before, unless
-- rounding put the meeting further off (a bucket of an hour took 29
-- steps).
local function sliding_retry_at(l, s, t)
  local g, b, newest = l.g, l.b, s[1]
  local function cnt(i)
    if i < newest - g or i > newest then return 0 end
    return s[slot(g, i)]
  end
  local function fits(c, full, old, x)
    return sliding_count(l, c, full, old, x) + cost <= l.r
  end
  local now = t
  local c, full, old = sliding_view(l, s, t)
  local pc, pfull, pold
  for _ = 0, g + 2 do
    local e = (c + 1) * b
    if fits(c, full, old, e - 1) then
      local lo, hi = t, e - 1
      if l.a == 2 or old == 0 then
        hi = lo -- the count is the same at every instant of the bucket: no search
      else
        local m = sliding_meets(l, c, full, old)
        local a = min(max(m - 2, lo), hi)
        if not fits(c, full, old, a) then lo = a + 1 end
        local z = min(max(m + 2, lo), hi)
        if fits(c, full, old, z) then hi = z end
      end
      while lo < hi do
        local mid = lo + floor((hi - lo) / 2)
        if fits(c, full, old, mid) then hi = mid else lo = mid + 1 end
      end
      if l.a == 2 or lo == now then return lo, 0 end
      if lo > t then return lo, sliding_refine(l, c, full, old, lo) end
      return lo, sliding_refine(l, pc, pfull, pold, lo)
    end
    pc, pfull, pold = c, full, old
    c, t = c + 1, e
    old = cnt(c - g)
    full = full - old
  end
  error('sluice: sliding window retry did not converge')
end

local function sliding_check(l, s, t)
  local c, full, old = sliding_view(l, s, t)
  local count = sliding_count(l, c, full, old, t)
  if count + cost <= l.r then
    return true, floor(l.r - count - cost), sliding_reset(l, s, t, true), 0, 0, 0
  end
  local at, adj = sliding_retry_at(l, s, t)
  return false, max(floor(l.r - count), 0), sliding_reset(l, s, t, false), at - t, 0, adj
end

local function sliding_commit(l, s, t)
  local g = l.g
  local cur = fdiv(t, l.b)
  if cur > s[1] then
    if cur - s[1] > g then
      for k = 2, g + 2 do s[k] = 0 end
    else
      for i = s[1] + 1, cur do s[slot(g, i)] = 0 end
    end
    s[1] = cur
  end
  local k = slot(g, s[1])
  s[k] = s[k] + cost
end

local function sliding_refund(l, s, a, t)
  local g, left = l.g, cost
  local i = max(fdiv(a, l.b), s[1] - g)
  while i <= s[1] and left > 0 do
    local k = slot(g, i)
    local n = min(s[k], left)
    s[k] = s[k] - n
    left = left - n
    i = i + 1
  end
end

---------------------------------------------------------------- sliding log

-- A log's state is [next slot, t0..tN-1]. Logs of up to LOGFULL words are
-- read whole; longer ones are read by GETRANGE, one probe per timestamp
-- the binary search touches, and written by SETRANGE, so a take costs
-- O(log N) however large the log.
local LOGFULL = 512

-- log_open returns the log of limit l in key k: s.w holds the words read
-- so far (all of them unless s.lazy), s.whole says the state must be
-- written back whole (a new key, or one fitted from another rate).
local function log_open(l, k)
  local n = l.r
  local s = {k = k, n = n, lazy = false, whole = false}
  local v
  if n + 1 > LOGFULL then
    local len = redis.call('STRLEN', k)
    if len == 8 * (n + 1) then
      s.lazy, s.w = true, {}
      s.w[1] = word(k, unpack1('<d', redis.call('GETRANGE', k, 0, 7)))
      if s.w[1] >= n then corrupt(k, 'log slot out of range') end
      return s, true
    end
    if len > 0 then v = redis.call('GET', k) end
  else
    v = redis.call('GET', k)
  end
  if not v then
    s.w, s.whole = zeros(n + 1), true
    return s, false
  end
  local len = #v
  if len % 8 ~= 0 or len < 16 then corrupt(k, 'bad length') end
  local old = len / 8 - 1
  local w = decode(k, v, old + 1)
  if w[1] >= old then corrupt(k, 'log slot out of range') end
  if old ~= n then
    -- algorithm.Fit: keep the newest timestamps, oldest first
    local keep = min(old, n)
    local out = zeros(n + 1)
    for j = 0, keep - 1 do
      out[2 + n - keep + j] = w[2 + (w[1] + old - keep + j) % old]
    end
    w, s.whole = out, true
  end
  s.w = w
  -- algorithm.Verify: timestamps in order from the oldest
  local prev = 0
  for j = 0, n - 1 do
    local x = w[2 + (w[1] + j) % n]
    if x < prev then corrupt(k, 'log out of order') end
    prev = x
  end
  return s, true
end

-- log_at returns the timestamp at ring position j (0 = oldest).
local function log_at(s, j)
  local p = 2 + (s.w[1] + j) % s.n
  local x = s.w[p]
  if x == nil then
    local o = 8 * (p - 1)
    x = word(s.k, unpack1('<d', redis.call('GETRANGE', s.k, o, o + 7)))
    s.w[p] = x
  end
  return x
end

local function log_first_live(l, s, t)
  local since = t - l.p
  local lo, hi = 0, s.n
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    local x = log_at(s, mid)
    if x ~= 0 and x > since then hi = mid else lo = mid + 1 end
  end
  return lo
end

local function log_check(l, s, t)
  local n = s.n
  local first = log_first_live(l, s, t)
  local live = n - first
  local newest = log_at(s, n - 1)
  if live + cost <= n then
    return true, n - live - cost, max(max(t, newest) + l.p - t, 0), 0, 0, 0
  end
  local expire = log_at(s, first + live + cost - n - 1)
  return false, n - live, max(newest + l.p - t, 0), max(expire + l.p - t, 0), 0, 0
end

local function log_commit(l, s, t)
  local n = s.n
  local ts = max(t, log_at(s, n - 1))
  local start = s.w[1]
  for j = 0, cost - 1 do s.w[2 + (start + j) % n] = ts end
  s.w[1] = (start + cost) % n
  s.from, s.ts = start, ts
end

-- log_load reads a lazy log whole, for the rare operations that move many
-- of its words.
local function log_load(s)
  if s.lazy then
    s.w = decode(s.k, redis.call('GET', s.k), s.n + 1)
    s.lazy = false
  end
end

local function log_refund(l, s, a, t)
  log_load(s)
  local n = s.n
  local k = 0
  while k < n and (log_at(s, k) == 0 or log_at(s, k) < a) do k = k + 1 end
  local m = min(cost, n - k)
  local w, base = s.w, s.w[1]
  local function p(j) return 2 + (base + j) % n end
  for i = k + m - 1, m, -1 do w[p(i)] = w[p(i - m)] end
  for i = 0, m - 1 do w[p(i)] = 0 end
  s.whole = true
end

-- log_store writes a changed log back with expiry px (ms), or keeping
-- its expiry when px is nil.
local function log_store(s, px)
  if s.whole or not s.lazy then
    if px then redis.call('SET', s.k, encode(s.w), 'PX', px)
    else redis.call('SET', s.k, encode(s.w), 'KEEPTTL') end
    return
  end
  -- a lazy log after a take: cost slots from s.from hold s.ts
  local n, left, p = s.n, cost, s.from
  local v = pack('<d', s.ts)
  while left > 0 do
    local run = min(left, n - p)
    redis.call('SETRANGE', s.k, 8 + 8 * p, string.rep(v, run))
    left, p = left - run, 0
  end
  redis.call('SETRANGE', s.k, 0, pack('<d', s.w[1]))
  redis.call('PEXPIRE', s.k, px)
end

---------------------------------------------------------------- policy

local check = {[0] = gcra_check, fixed_check, sliding_check, sliding_check, log_check}
local commit = {[0] = gcra_commit, fixed_commit, sliding_commit, sliding_commit, log_commit}
local refund = {[0] = gcra_refund, fixed_refund, sliding_refund, sliding_refund, log_refund}

local words = {[0] = function() return 1 end, function() return 2 end,
  function(l) return l.g + 2 end, function(l) return l.g + 2 end}

-- Load every limit's state: reads only, so that a corrupt key fails the
-- whole request before anything is written.
local L, S, E = {}, {}, {}
for i = 1, nk do
  local j = 6 + (i - 1) * 7
  local l = {a = tonumber(A[j]), r = tonumber(A[j + 1]), p = tonumber(A[j + 2]),
    g = tonumber(A[j + 3]), b = tonumber(A[j + 4]), off = tonumber(A[j + 5]),
    adj = tonumber(A[j + 6])}
  local k = KEYS[kb + i]
  if l.a == 4 then
    S[i], E[i] = log_open(l, k)
  else
    local n = words[l.a](l)
    local v = redis.call('GET', k)
    if not v then
      S[i], E[i] = zeros(n), false
    elseif #v ~= 8 * n then
      corrupt(k, 'bad length')
    else
      S[i], E[i] = decode(k, v, n), true
    end
  end
  L[i] = l
end

-- An insert counts cost whether or not it fits (see sluice.OpInsert):
-- a penalty commits it, GCRA's no deeper than 2τ - T past now; a reward
-- refunds -cost of what still counts, the oldest first. Its states are
-- written after the check below, which gives their expiry; the check is
-- a peek of 1.
local insert = op == 4
local icost = cost
if insert then
  for i = 1, nk do
    local l, s, t = L[i], S[i], now - L[i].off
    if icost > 0 then
      if l.a == 0 then
        local tau = l.p * l.r
        s[1] = min(max(s[1], t) + icost * l.p, max(s[1], t + 2 * tau - l.p))
      else
        commit[l.a](l, s, t)
      end
    elseif E[i] then
      cost = -icost
      -- from the oldest unit that still counts, as algorithm.Insert: a
      -- log's entries after t - p, the buckets from t - p + 1 ns's
      local from = t
      if l.a == 4 then from = t - l.p + 1 elseif l.a > 1 then from = t - l.p end
      refund[l.a](l, s, from, t)
      cost = icost
    end
  end
  op, cost = 1, 1
end

if op == 2 then
  for i = 1, nk do
    local l, s = L[i], S[i]
    if E[i] then
      refund[l.a](l, s, at - l.off, now - l.off)
      if l.a == 4 then
        log_store(s, nil)
      else
        redis.call('SET', KEYS[kb + i], encode(s), 'KEEPTTL')
      end
    end
  end
  op = 1 -- a refund answers what a peek of its cost just after it gets
end

-- Check every limit; the binding one describes the decision (see
-- sluice.Decision.Binds): a denial, the longest retry, the fewest remaining.
local ok, bi, brem, breset, bretry, bresetadj, bretryadj
local resets = {}
for i = 1, nk do
  local l = L[i]
  local a, rem, reset, retry, resetadj, retryadj = check[l.a](l, S[i], now - l.off)
  resets[i] = reset
  local binds
  if i == 1 then
    binds = true
  elseif a ~= ok then
    binds = not a
  elseif not a then
    binds = retry > bretry or (retry == bretry and retryadj < bretryadj)
  else
    binds = rem < brem
  end
  if binds then
    ok, bi, brem, breset, bretry, bresetadj, bretryadj = a, i, rem, reset, retry, resetadj, retryadj
  end
end

if op == 0 and ok then
  for i = 1, nk do
    local l, s = L[i], S[i]
    commit[l.a](l, s, now - l.off)
    local px = max(math.ceil(resets[i] / 1000) + slack, 1)
    if l.a == 4 then
      log_store(s, px)
    else
      redis.call('SET', KEYS[kb + i], encode(s), 'PX', px)
    end
  end
end

if insert then
  cost = icost -- what log_store writes of a lazy log
  for i = 1, nk do
    local l, s = L[i], S[i]
    if icost > 0 or E[i] then
      local px = max(math.ceil(resets[i] / 1000) + slack, 1)
      if l.a == 4 then
        log_store(s, px)
      else
        redis.call('SET', KEYS[kb + i], encode(s), 'PX', px)
      end
    end
  end
end

if ok then ok = 1 else ok = 0 end
return struct.pack('<dddddddd', ok, bi, brem, breset, bretry, now, bresetadj, bretryadj)
