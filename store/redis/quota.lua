-- quota.lua: one call of an edge quota's table of shares, the twin of
-- algorithm.QuotaTable in microseconds. The table is a hash whose fields
-- are holders and whose values are "demand share expiry" (expiry in µs);
-- a share counts while now < its expiry. One call drops the expired
-- shares, applies the request and counts what is left, atomically: one
-- round trip per share asked or given back, so every process sharing the
-- Redis divides one limit.
--
-- KEYS[1]  the table.
-- ARGV     holder, demand (-1: unknown, -2: keep the holder's), limit, TTL µs (0: release),
--          now µs (-1: the server's TIME), most holders, key TTL slack ms,
--          reserve (units kept for holders without a share).
-- Returns  {share, holders after, sum of shares, sum of demands,
--          expiry µs of the share (0 if none), now µs, 1 if refused as
--          full else 0}.
local key, id = KEYS[1], ARGV[1]
local demand, limit, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now, most, slack = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local reserve = math.max(math.min(tonumber(ARGV[8]), limit - 1), 0)
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function clamp(d)
  if d < 0 or d > limit then return limit end
  return d
end
-- The live holders, {id, demand, share, expiry} each; expired and
-- unreadable ones are dropped.
local hs, mine, dead = {}, nil, {}
local flat = redis.call('HGETALL', key)
for i = 1, #flat, 2 do
  local d, s, e = string.match(flat[i + 1], '^(%-?%d+) (%d+) (%d+)$')
  d, s, e = tonumber(d), tonumber(s), tonumber(e)
  if e == nil or e <= now then
    dead[#dead + 1] = flat[i]
  else
    hs[#hs + 1] = {flat[i], d, s, e}
    if flat[i] == id then mine = #hs end
  end
end
if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
local share, exp, full = 0, 0, 0
if ttl == 0 then
  if mine then
    redis.call('HDEL', key, id)
    table.remove(hs, mine)
  end
else
  if not mine then
    if #hs >= most then
      full = 1
    else
      hs[#hs + 1] = {id, -1, 0, 0}
      mine = #hs
    end
  end
  if mine then
    exp = now + ttl
    local h = hs[mine]
    if demand == -2 then demand = h[2] end
    h[2], h[4] = demand, exp
    -- The water level of limit - reserve: the share of whoever wants
    -- more than the others leave.
    local ds = {}
    for i, x in ipairs(hs) do ds[i] = clamp(x[2]) end
    table.sort(ds)
    local level, left = limit - reserve, limit - reserve
    for k = 1, #ds do
      local fair = math.floor(left / (#ds - k + 1))
      if ds[k] > fair then
        level = fair
        break
      end
      left = left - ds[k]
    end
    local fair = math.min(clamp(demand), level)
    local granted = 0
    for _, x in ipairs(hs) do granted = granted + x[3] end
    local old = h[3]
    share = fair
    if old > 0 and math.abs(fair - old) * 40 <= old then share = old end
    -- Room beyond the reserve, less what the others keep beyond their
    -- fair shares within the hysteresis (QuotaTable's slack); without a
    -- share, half of what is free; with one, that share up to the fair one.
    local free = limit - (granted - old)
    local slack = 0
    for j, x in ipairs(hs) do
      local over = x[3] - math.min(clamp(x[2]), level)
      if j ~= mine and over > 0 and over * 40 <= x[3] then slack = slack + over end
    end
    local room = free - math.max(reserve - slack, 0)
    if old == 0 then
      room = math.max(room, math.floor((free + 1) / 2))
    else
      room = math.max(room, math.min(old, fair))
    end
    share = math.max(math.min(share, room, free), 0)
    h[3] = share
    redis.call('HSET', key, id, string.format('%d %d %d', demand, share, exp))
  end
end
local granted, dsum, last = 0, 0, 0
for _, x in ipairs(hs) do
  granted = granted + x[3]
  dsum = dsum + clamp(x[2])
  last = math.max(last, x[4])
end
if #hs > 0 then
  redis.call('PEXPIRE', key, math.ceil((last - now) / 1000) + slack)
else
  redis.call('DEL', key)
end
return {share, #hs, granted, dsum, exp, now, full}
