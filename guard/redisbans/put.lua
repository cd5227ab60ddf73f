-- put.lua records one ban, deletes the bans merged into it, drops lapsed
-- bans and logs the change, atomically.
--
-- KEYS[1]  the hash of bans: field (jail and key) → record
-- KEYS[2]  the sorted set: fields of bans and of lifts, scored by their
--          end (Unix ms), for pruning
-- KEYS[3]  the hash of lifts: field → end of the lifted ban (Unix ms)
-- KEYS[4]  the version: the number of the last change logged
-- KEYS[5]  the change log, a stream
-- ARGV[1]  the field of the ban, or "" to delete merged bans only
-- ARGV[2]  its record
-- ARGV[3]  its end, Unix ms
-- ARGV[4]  now by the caller's clock, Unix ms
-- ARGV[5]  most lapsed bans to drop in this call
-- ARGV[6]  the length the log keeps (XADD MAXLEN ~)
-- ARGV[7]  "1" to write the ban back: only if Redis holds neither a ban
--          nor a lift of the field, which would be later changes
-- ARGV[8…] fields of the bans merged into it, to delete
--
-- The log entry is v, the version, then "d", field for each delete and
-- "p", field, "r", record for the put: deletes first, so that a replica
-- at capacity has room for the put. A merged field is deleted only if it
-- holds a ban (a lift's mark stays). Returns the version, or 0 if it
-- wrote nothing back.
if ARGV[7] == '1' and (redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 or redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1) then
	return 0
end
local entry = {}
for i = 8, #ARGV do
	if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
		redis.call('ZREM', KEYS[2], ARGV[i])
	end
	entry[#entry + 1] = 'd'
	entry[#entry + 1] = ARGV[i]
end
if ARGV[1] ~= '' then
	redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
	redis.call('HDEL', KEYS[3], ARGV[1])
	redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
	entry[#entry + 1] = 'p'
	entry[#entry + 1] = ARGV[1]
	entry[#entry + 1] = 'r'
	entry[#entry + 1] = ARGV[2]
end
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[4], 'LIMIT', 0, tonumber(ARGV[5]))
if #lapsed > 0 then
	redis.call('HDEL', KEYS[1], unpack(lapsed))
	redis.call('HDEL', KEYS[3], unpack(lapsed))
	redis.call('ZREM', KEYS[2], unpack(lapsed))
end
if #entry == 0 then
	return tonumber(redis.call('GET', KEYS[4]) or 0)
end
local v = redis.call('INCR', KEYS[4])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[6], '*', 'v', v, unpack(entry))
return v
