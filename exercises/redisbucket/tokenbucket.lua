-- Task 6 goal: one token bucket per key, kept in Redis so that every process
-- of a service shares it. Redis runs a script as one indivisible step, so if
-- the read, the refill, the decision and the write all happen in here, no
-- other caller can slip in between them.
--
-- Fill in every TODO(task6) below and delete the last line, then run
--
--	go test -tags exercises ./exercises/redisbucket
--
-- The Go side (redisbucket.go) embeds this file, runs it once per decision
-- with EVALSHA and turns the reply into (ok, wait); you don't need to edit
-- it. To try the script by hand against a running Redis:
--
--	redis-cli EVAL "$(cat tokenbucket.lua)" 1 mykey 2 5 1
--
-- KEYS[1]  the bucket: a hash with the fields tokens and ts
-- ARGV[1]  rate, in tokens per second
-- ARGV[2]  burst, the most tokens the bucket holds
-- ARGV[3]  n, the tokens this call wants
--
-- Return {allowed, wait}. allowed is 1 or 0. wait is 0 when allowed;
-- otherwise it is the time until n tokens will be there, in milliseconds,
-- never rounded down, or -1 when n can never be had (n > burst). Redis turns
-- a Lua number into an integer by dropping its fraction, so send a wait with
-- a fraction as a string (string.format), or round it up to whole ms first.

local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])

-- TODO(task6): refuse at once, changing nothing, when n > burst. (An n of 0
-- or less never reaches the script: Go answers it itself.)

-- TODO(task6): read the time from Redis's own clock, redis.call('TIME'),
-- which returns {seconds, microseconds} as strings. Never take a time from
-- the caller: the processes' clocks disagree. Whole microseconds fit exactly
-- in a Lua number.

-- TODO(task6): load tokens and ts with HMGET. A missing key is a full
-- bucket. Add what dripped in since ts, capped at burst.

-- TODO(task6): decide. If at least n tokens are there, subtract n, store
-- tokens and ts with HSET, set an expiry with PEXPIRE (the time the bucket
-- needs to refill to full, plus at most a second) and return {1, 0}.
-- Pass numbers to HSET as they are: Redis writes them with 17 digits, while
-- tostring keeps only 14 and would lose the microseconds of a time in
-- seconds.

-- TODO(task6): otherwise change nothing and return {0, wait}, the wait
-- worked out from the missing tokens and the rate.

return redis.error_reply('task 6: tokenbucket.lua is not implemented yet')
