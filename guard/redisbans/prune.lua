-- prune.lua drops bans and lifts that lapsed by now, at most ARGV[2] of
-- them, and returns how many it dropped. Replicas drop lapsed bans by
-- themselves: nothing is logged.
--
-- KEYS[1]  the hash of bans: field → record
-- KEYS[2]  the sorted set: fields scored by their end (Unix ms)
-- KEYS[3]  the hash of lifts: field → end of the lifted ban
-- ARGV[1]  now by the caller's clock, Unix ms
-- ARGV[2]  most lapsed entries to drop in this call
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #lapsed > 0 then
	redis.call('HDEL', KEYS[1], unpack(lapsed))
	redis.call('HDEL', KEYS[3], unpack(lapsed))
	redis.call('ZREM', KEYS[2], unpack(lapsed))
end
return #lapsed
