-- lift.lua lifts one ban and logs the change, atomically. The lift
-- leaves a mark, kept until the lifted ban would have ended, so that no
-- process writes the ban back: a later ban of the key replaces it.
--
-- KEYS     as put.lua
-- ARGV[1]  the field (jail and key)
-- ARGV[2]  the end of the ban the caller's process held, Unix ms, or 0
-- ARGV[3]  now by the caller's clock, Unix ms
-- ARGV[4]  the length the log keeps (XADD MAXLEN ~)
--
-- Returns 1 if the hash held a ban of the field in force, else 0. With
-- no ban in force here nor in the caller's process, it only drops a
-- lapsed record, and logs nothing.
local now = tonumber(ARGV[3])
local score = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or 0)
local held = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 and score > now
local untilms = tonumber(ARGV[2])
if held and score > untilms then
	untilms = score
end
if untilms <= now then
	if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
		redis.call('ZREM', KEYS[2], ARGV[1])
	end
	return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], untilms)
redis.call('ZADD', KEYS[2], untilms, ARGV[1])
local v = redis.call('INCR', KEYS[4])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[4], '*', 'v', v, 'd', ARGV[1])
if held then
	return 1
end
return 0
