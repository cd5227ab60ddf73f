-- lease.lua: one call of a concurrency limit's lease table, the twin of
-- algorithm.LeaseTable in microseconds. The table is a sorted set whose
-- members are lease IDs scored by their expiry (µs); a lease is live while
-- now < its expiry. One call drops the expired leases, applies the op and
-- counts what is left, atomically: one round trip per acquire, release or
-- extend.
--
-- KEYS[1]  the table.
-- ARGV     op (1 acquire, 2 release, 3 extend), lease ID, ceiling, TTL µs,
--          now µs (-1: the server's TIME), key TTL slack ms.
-- Returns  {allowed, live leases after, expiry µs of the lease (0 if it
--          holds none), earliest expiry µs (0 if none), now µs}.
local key, id = KEYS[1], ARGV[2]
local op, ceiling, ttl = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now, slack = tonumber(ARGV[5]), tonumber(ARGV[6])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local exp = now + ttl
local cur = redis.call('ZSCORE', key, id)
local ok = 0
if op == 1 then
  if cur then
    ok = 1
    if tonumber(cur) < exp then redis.call('ZADD', key, exp, id) end
  elseif redis.call('ZCARD', key) < ceiling then
    redis.call('ZADD', key, exp, id)
    ok = 1
  end
elseif op == 2 then
  ok = redis.call('ZREM', key, id)
elseif cur then
  redis.call('ZADD', key, exp, id)
  ok = 1
end
local n = redis.call('ZCARD', key)
local mine, first = 0, 0
if n > 0 then
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', key, math.ceil((tonumber(last[2]) - now) / 1000) + slack)
  first = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
  if ok == 1 and op ~= 2 then mine = tonumber(redis.call('ZSCORE', key, id)) end
end
return {ok, n, mine, first, now}
