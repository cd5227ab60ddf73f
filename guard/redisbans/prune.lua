-- prune.lua drops bans that lapsed by now, at most ARGV[2] of them, and
-- returns how many it dropped.
--
-- KEYS[1]  the hash: field → the ban's record
-- KEYS[2]  the sorted set: field scored by the ban's end (Unix ms)
-- ARGV[1]  now by the caller's clock, Unix ms
-- ARGV[2]  most lapsed bans to drop in this call
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #lapsed > 0 then
	redis.call('HDEL', KEYS[1], unpack(lapsed))
	redis.call('ZREM', KEYS[2], unpack(lapsed))
end
return #lapsed
