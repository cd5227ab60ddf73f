-- put.lua records one ban and drops lapsed ones, atomically.
--
-- KEYS[1]  the hash: field → the ban's record
-- KEYS[2]  the sorted set: field scored by the ban's end (Unix ms)
-- ARGV[1]  the field (jail and key, length-prefixed)
-- ARGV[2]  the record
-- ARGV[3]  the ban's end, Unix ms
-- ARGV[4]  now by the caller's clock, Unix ms
-- ARGV[5]  most lapsed bans to drop in this call
--
-- The keys expire when their last ban lapses, by the caller's clock
-- (relative to now, so a skewed or fake clock cannot expire them early).
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[4], 'LIMIT', 0, tonumber(ARGV[5]))
if #lapsed > 0 then
	redis.call('HDEL', KEYS[1], unpack(lapsed))
	redis.call('ZREM', KEYS[2], unpack(lapsed))
end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] then
	local ttl = math.max(tonumber(last[2]) - tonumber(ARGV[4]), 1)
	redis.call('PEXPIRE', KEYS[1], ttl)
	redis.call('PEXPIRE', KEYS[2], ttl)
end
return #lapsed
