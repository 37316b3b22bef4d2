-- WRONG (task 6, no-cap): the refill is not capped at burst, so an idle bucket hoards tokens; caught by CapsAtBurst.

-- Task 6 goal: one token bucket per key, kept in Redis so that every process
-- of a service shares it. Redis runs a script as one indivisible step, so the
-- read, the refill, the decision and the write below cannot interleave with
-- another caller's.
--
-- This is the reference solution. Where the exercise has a TODO(task6), it
-- has a short explanation instead.
--
-- KEYS[1]  the bucket: a hash with the fields tokens and ts
-- ARGV[1]  rate, in tokens per second
-- ARGV[2]  burst, the most tokens the bucket holds
-- ARGV[3]  n, the tokens this call wants
--
-- Returns {allowed, wait}. allowed is 1 or 0. wait is 0 when allowed;
-- otherwise it is the time until n tokens will be there, in milliseconds, as
-- a string with three decimals rounded up (Redis would truncate a Lua number
-- to an integer), or -1 when n can never be had (n > burst, or a rate of 0).

local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])

-- Nothing asked, nothing spent; more than the bucket can ever hold is
-- refused at once. Neither touches the state.
if n <= 0 then
  return {1, 0}
end
if n > burst then
  return {0, -1}
end

-- The time comes from Redis, never from the caller, so that processes whose
-- clocks disagree still agree on the bucket. In microseconds it is an integer
-- below 2^53, which a Lua number holds exactly.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- A missing key is a full bucket. The stored numbers were written by HSET
-- with Lua numbers, which Redis formats with 17 significant digits, so they
-- come back exactly (tostring would keep only 14 and lose microseconds).
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens, ts = burst, now
end

-- Lazy refill, capped at burst. Should Redis's clock step back (a failover to
-- a replica whose clock is behind), nothing drips in until it catches up
-- with ts again.
if now > ts then
  tokens = tokens + (now - ts) * rate / 1000000
  ts = now
end

-- The decision. A tolerance of a billionth of a token absorbs the rounding of
-- the refill, so a caller that sleeps exactly the wait it was given and comes
-- back is let in.
if tokens + 1e-9 * math.max(1, burst) >= n then
  tokens = math.max(0, tokens - n)
  redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', ts)
  -- Expire the key once the bucket is full again, when it is the same as no
  -- key, plus a second of margin. Every take pushes the expiry out, so a key
  -- in use never expires and an idle one does not stay for ever. A bucket
  -- that never refills (rate 0) must keep its key.
  if rate > 0 then
    redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
  end
  return {1, 0}
end

-- Refused: write nothing, so the refusal leaves no trace; the expiry set by
-- the last take still outlives the refill. The wait counts from ts, which is
-- now unless the clock stepped back, and is rounded up to the microsecond so
-- it is never short.
if rate <= 0 then
  return {0, -1}
end
local wait = (ts - now) + math.ceil((n - tokens) / rate * 1000000)
return {0, string.format('%.3f', wait / 1000)}
