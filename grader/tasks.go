package grader

// tasks is the lab's metadata: every task with its files, handout and hints.
// Hints name the idea and where to read more; they never contain code.
var tasks = []Task{
	{
		ID:      "task1",
		Number:  1,
		Title:   "watch an unprotected server collapse",
		Handout: "docs/tasks/task1.md",
		Hints: []string{
			"There is no code to write: task 1 floods the unprotected server and checks\n" +
				"the measurements against the one-line model in the lesson's Measure section.\n" +
				"Read \"What overload actually does\" and predict each row before you run it.",
			"The model: the line grows by λ−C per second, and a request succeeds only if\n" +
				"its wait plus the work fits in the client's timeout. Solve for the arrival\n" +
				"time where that stops being true, then multiply by λ.",
		},
		grade:   gradeTask1,
		planned: task1Planned,
	},
	{
		ID:      "task2",
		Number:  2,
		Title:   "say no early: load shedding and deadlines",
		Handout: "docs/tasks/task2.md",
		Files:   []string{"exercises/shedding/shedding.go"},
		Hints: []string{
			"Order the checks from cheapest to dearest. Refusing a request before it joins\n" +
				"the line costs a few bytes; refusing it after it took a slot wasted the slot.\n" +
				"Read \"Say no early: load shedding\" in the lesson.",
			"Retry-After is a promise that retrying sooner is pointless. Whole seconds,\n" +
				"rounded up, never 0: a client told 0 comes straight back. See RFC 9110 on\n" +
				"Retry-After and the lesson's \"Saying no in HTTP\".",
			"How long does a line take to drain? Little's Law: the number waiting divided\n" +
				"by the rate it empties at, which is the server's capacity (slots / work time).",
			"A deadline checks how long the request already waited, after it reaches the\n" +
				"front. Every path that took a slot must give it back, including that one.\n" +
				"Break It 3 in the lesson shows why a bound alone is not enough.",
		},
		Unit: &Unit{
			Package: "shedding", File: "shedding.go", Test: "TestShedding",
			Checks: []UnitCheck{
				{"Retry-After in whole seconds, rounded up", []string{"RetryAfterSeconds"}, 1},
				{"how long the line takes to drain", []string{"DrainTime"}, 1},
				{"an idle server does the work and answers 200", []string{"Serve200", "BucketAllowed"}, 1},
				{"429 from the client's bucket, before the line", []string{"Limited429", "LimitBeforeShed", "ShedModeSkipsLimiter"}, 2},
				{"503 at once when the line is full, before any slot", []string{"ShedWhenLineFull", "ShedBeforeSlot", "LineBound"}, 2},
				{"requests that waited past the deadline are dropped", []string{"DeadlineExpiry", "DeadlineZeroIsOff"}, 2},
				{"a client that gives up leaves the line", []string{"ClientLeavesLine"}, 1},
				{"every slot is given back, nothing left running", []string{"SlotAlwaysReleased", "NoGoroutineLeak"}, 2},
				{"random requests on random servers answered as a model of the server says, every Retry-After checked", []string{"AdmitMatchesModel"}, 3},
				{"the same promises on the real clock, over HTTP", []string{"RealClock"}, 1},
			},
		},
		grade:   gradeTask2,
		planned: task2Planned,
	},
	{
		ID:      "task3",
		Number:  3,
		Title:   "who gets the capacity: a token bucket and a keyed limiter",
		Handout: "docs/tasks/task3.md",
		Files:   []string{"exercises/bucket/bucket.go"},
		Hints: []string{
			"Two numbers of state are enough: the tokens left and when you last looked.\n" +
				"There is no timer dripping tokens in; when a call arrives, work out what\n" +
				"dripped in since last time. The lesson calls this lazy refill.",
			"The bucket never holds more than its burst, however long it sat idle. Over any\n" +
				"stretch of T seconds it can let through at most burst + rate × T.",
			"A refused call must leave no trace: the next caller should see exactly the\n" +
				"bucket it would have seen had the refused call never happened.",
			"The wait is the missing tokens divided by the rate. Round it so a caller who\n" +
				"sleeps exactly that long then succeeds; floating point can be a hair short.\n" +
				"golang.org/x/time/rate's reserveN is worth reading for how it handles time.",
			"A bucket that has refilled to full is the same as no bucket at all. That is\n" +
				"how the keyed limiter can forget clients and keep its memory bounded.",
		},
		Unit: &Unit{
			Package: "bucket", File: "bucket.go", Test: "TestBucket",
			Checks: []UnitCheck{
				{"starts full and refills at its rate", []string{"TokenBucket/StartsFull", "TokenBucket/RefillsAtRate"}, 2},
				{"never holds more than its burst", []string{"TokenBucket/CapsAtBurst"}, 1},
				{"the exact wait", []string{"TokenBucket/ExactWait"}, 2},
				{"a refused call changes nothing", []string{"TokenBucket/DenialLeavesStateUntouched"}, 2},
				{"more than burst never succeeds; fractions and zero", []string{"TokenBucket/MoreThanBurstNeverSucceeds", "TokenBucket/FractionalTokens", "TokenBucket/ZeroOrNegativeTakesNothing"}, 1},
				{"rate 0 never refills; negative or NaN settings are refused; the zero value admits nothing", []string{"TokenBucket/RateZeroNeverRefills", "TokenBucket/RejectsNegativeOrNaN", "TokenBucket/ZeroValueAdmitsNothing", "KeyedLimiter/RateZeroNeverRefills", "KeyedLimiter/RejectsNegativeOrNaN", "KeyedLimiter/ZeroValueAdmitsNothing"}, 1},
				{"safe for concurrent use", []string{"TokenBucket/ConcurrentNeverExceedsBurst", "TokenBucket/ConcurrentRefillBound"}, 2},
				{"matches an exact model over thousands of random calls", []string{"TokenBucket/MatchesModel"}, 2},
				{"one independent bucket per key", []string{"KeyedLimiter/KeysAreIndependent", "KeyedLimiter/MatchesModelPerKey", "KeyedLimiter/FullBucketComesBackFull", "KeyedLimiter/PartialBucketSurvivesFlood"}, 2},
				{"keyed limiter safe for concurrent use", []string{"KeyedLimiter/ConcurrentNeverExceedsBurstPerKey"}, 1},
				{"memory stays bounded under a flood of keys", []string{"KeyedLimiter/MemoryBoundedUnderKeyFlood", "KeyedLimiter/MemoryBoundedOnRealClock"}, 2},
				{"the bucket keeps its promises on the real clock", []string{"TokenBucket/RealClock"}, 1},
			},
		},
		grade:       gradeTask3,
		planned:     task3Planned,
		ownsMachine: true,
	},
	{
		ID:      "task4",
		Number:  4,
		Title:   "retries that help: full jitter, Retry-After, a retry budget, and the storm",
		Handout: "docs/tasks/task4.md",
		Files:   []string{"exercises/retry/retry.go"},
		Hints: []string{
			"Cap first, then jitter: work out the ceiling, the smaller of cap and base\n" +
				"doubled once per attempt, then draw uniformly between 0 and it. Compare\n" +
				"instead of multiplying and nothing overflows. Marc Brooker's \"Exponential\n" +
				"Backoff And Jitter\" (AWS Architecture Blog) shows why full jitter wins.",
			"Retry only what may pass: 429, 500, 502, 503, 504, 529, timeouts and broken\n" +
				"connections. Everything else comes back at once. To tell the caller's\n" +
				"cancellation from a timeout, ask the context you were given, not the error.",
			"Retry-After is a floor on your wait, not the wait itself, in whole seconds or\n" +
				"as an HTTP date (net/http parses both). Add a little randomness on top, cap\n" +
				"it at your own Cap, and mind overflow. RFC 9110, section 10.2.3.",
			"A dropped response holds its connection until its body is read and closed.\n" +
				"A request body is used up by the attempt that sends it: clone the request\n" +
				"for each attempt. See the net/http docs for Client.Do and Request.Clone.",
			"A retry budget is a token bucket filled by traffic instead of time: each\n" +
				"first attempt adds a fraction of a retry, each retry spends a whole one.\n" +
				"See gRPC's retry throttling (gRFC A6) and the SRE book's \"Handling Overload\".",
		},
		Unit: &Unit{
			Package: "retry", File: "retry.go", Test: "TestRetry",
			Checks: []UnitCheck{
				{"backoff doubles from base, is capped, never overflows", []string{"BackoffBounds", "BackoffCap", "BackoffNoOverflow"}, 2},
				{"full jitter is uniform on [0, ceiling], from many goroutines too", []string{"FullJitterIsUniform", "BackoffConcurrent"}, 2},
				{"retries the right failures, and only those", []string{"RetriesRetryableStatuses", "NeverRetries4xx", "RetriesTimeouts", "RetriesConnectionErrors", "NeverRetriesOtherErrors"}, 2},
				{"random scripts: every attempt, wait, body and error as the model says", []string{"FollowsTheModel"}, 2},
				{"waits the backoff between attempts, stops after MaxTries", []string{"BackoffBetweenAttempts", "StopsAfterMaxTries"}, 1},
				{"Retry-After is a floor, with jitter on top", []string{"RetryAfterSecondsFloor", "RetryAfterDateFloor", "RetryAfterJittered"}, 2},
				{"a huge Retry-After is capped", []string{"RetryAfterCapped"}, 1},
				{"discarded bodies drained and closed, request resent whole", []string{"ClosesDiscardedBodies", "ResendsRequest", "RealServer"}, 2},
				{"stops at once when ctx is done", []string{"StopsOnContextCancel"}, 1},
				{"OnAttempt before every attempt", []string{"OnAttemptCalled"}, 1},
				{"a retry budget caps retries at ratio × first attempts + 10", []string{"BudgetLimitsRetries"}, 2},
				{"the budget is safe for concurrent use", []string{"BudgetConcurrent", "BudgetConcurrentRealClock"}, 1},
			},
		},
		grade:   gradeTask4,
		planned: task4Planned,
	},
	{
		ID:      "task5",
		Number:  5,
		Title:   "a polite LLM API client against a faithful fake provider",
		Handout: "docs/tasks/task5.md",
		Files:   []string{"exercises/llmclient/llmclient.go"},
		Hints: []string{
			"A waiting bucket can promise tokens ahead of time: let the count go below\n" +
				"zero, and the depth of that debt tells the newest caller how long to wait.\n" +
				"Sleep outside the lock. See reserveN in golang.org/x/time/rate.",
			"A per-minute limit is a rate, and the API's bucket holds only a fraction of a\n" +
				"second of it. Read the lesson's \"LLM APIs\" section: any burst you allow\n" +
				"yourself must be smaller than the API's, or your first second is refused.",
			"With long prompts, input tokens are usually the binding limit. Take each\n" +
				"request's uncached tokens from a second bucket. Cache reads do not count;\n" +
				"Anthropic's \"Rate limits\" page says which tokens do.",
			"Sort failures into \"later\" and \"never\". Later: 429, 529, 5xx, timeouts.\n" +
				"Never: a 400, and the spend-limit 429, which has no retry-after. Back off\n" +
				"with full jitter, never sooner than retry-after, and cap a huge one at\n" +
				"MaxHold before you add to it, as task 4 caps Retry-After.",
			"How many in flight? Little's Law: rate × latency; more slots only queue.\n" +
				"Hold a slot from just before sending until the answer has been read.",
		},
		Unit: &Unit{
			Package: "llmclient", File: "llmclient.go", Test: "TestLLMClient",
			Checks: []UnitCheck{
				{"the waiting bucket waits exactly and in turn", []string{"WaitingBucket/ExactWaits", "WaitingBucket/FirstComeFirstServed", "WaitingBucket/MoreThanBurstIsBurst"}, 2},
				{"no waiter starves", []string{"WaitingBucket/NoStarvation"}, 1},
				{"a context ends the wait and takes nothing", []string{"WaitingBucket/ContextEndsTheWait"}, 1},
				{"the bucket is safe for concurrent use", []string{"WaitingBucket/ConcurrentNeverFasterThanRate", "WaitingBucket/ConcurrentRealClock"}, 1},
				{"sends the request the API expects", []string{"PoliteClient/SendsTheRequest"}, 1},
				{"retries what is worth retrying", []string{"PoliteClient/Retries529WithBackoff", "PoliteClient/RetriesTimeouts", "PoliteClient/RetriesConnectionErrors", "PoliteClient/GivesUpAfterMaxAttempts", "PoliteClient/RetriesWhatMayPass"}, 2},
				{"retry-after is a floor", []string{"PoliteClient/RetryAfterIsAFloor"}, 2},
				{"a huge retry-after counts as MaxHold, and backoffs saturate", []string{"PoliteClient/RetryAfterIsCapped", "PoliteClient/HugeBackoffSaturates"}, 1},
				{"retries spread with full jitter", []string{"PoliteClient/JitterSpreadsRetries"}, 1},
				{"never retries what cannot succeed", []string{"PoliteClient/NoRetryOn400", "PoliteClient/NoRetryOnSpendLimit"}, 2},
				{"stops when its context ends", []string{"PoliteClient/ContextEndsRetries"}, 1},
				{"at most MaxInFlight at once", []string{"PoliteClient/RespectsMaxInFlight"}, 2},
				{"small bursts, paced requests", []string{"PoliteClient/SmallBurst", "PoliteClient/PacesRequestsPerMinute"}, 2},
				{"paces input tokens too", []string{"PoliteClient/WaitsForInputTokens"}, 2},
				{"cached prefixes are free", []string{"PoliteClient/CachedPrefixIsFree"}, 1},
				{"slows down when the headers say little is left", []string{"PoliteClient/SlowsDownOnLowRemaining"}, 1},
				{"a whole job near its minimum", []string{"PoliteClient/FinishesNearTheMinimum"}, 2},
			},
		},
		grade:   gradeTask5,
		planned: task5Planned,
	},
	{
		ID:      "task6",
		Number:  6,
		Title:   "a token bucket in Redis shared by every worker",
		Handout: "docs/tasks/task6.md",
		Files:   []string{"exercises/redisbucket/tokenbucket.lua"},
		Hints: []string{
			"Everything between reading the bucket and writing it back belongs inside the\n" +
				"script: Redis runs one script at a time, so the race from the threads lesson\n" +
				"cannot happen there. See the lesson's \"Distributed rate limiting\".",
			"Take \"now\" from redis.call('TIME'), never from an argument: the workers'\n" +
				"clocks disagree. Whole microseconds fit exactly in a Lua number.",
			"Redis truncates a Lua number it returns to an integer and turns false into\n" +
				"nil. Send a fractional wait as a string, or round it up to whole\n" +
				"milliseconds. See \"Conversion between Lua and RESP types\" in Redis's docs.",
			"A bucket that has refilled to full is the same as no key (task 3's memory\n" +
				"idea). Set an expiry on every take: the refill time plus a little. See PEXPIRE.",
			"Same rules as task 3: refill lazily from ts, cap at burst, a refusal writes\n" +
				"nothing, and a missing key means a full bucket. Compare redis_rate's GCRA.",
		},
		Unit: &Unit{
			Package: "redisbucket", File: "tokenbucket.lua", Test: "TestRedisBucket",
			MaySkip: []string{"Redis/"},
			Checks: []UnitCheck{
				{"starts full, refills at its rate, capped at burst", []string{"Miniredis/StartsFull", "Miniredis/RefillsAtRate", "Miniredis/CapsAtBurst", "Redis/StartsFull", "Redis/RefillsAtRate", "Redis/CapsAtBurst"}, 2},
				{"the exact wait, never rounded down", []string{"Miniredis/ExactWait", "Redis/ExactWait"}, 2},
				{"fractions; more than burst is never", []string{"Miniredis/FractionalTokens", "Miniredis/MoreThanBurst", "Redis/FractionalTokens", "Redis/MoreThanBurst"}, 1},
				{"idle keys expire, keys in use don't", []string{"Miniredis/Expiry", "Redis/Expiry"}, 1},
				{"many keys: state kept, one key each, all expiring", []string{"Miniredis/Keyspace", "Redis/Keyspace"}, 1},
				{"random sequences judged by Redis's own clock", []string{"Miniredis/Model", "Redis/Model"}, 2},
				{"Redis's clock, not the client's", []string{"Miniredis/RedisClock", "Redis/RedisClock"}, 2},
				{"no token spent twice under concurrency", []string{"Miniredis/Atomicity", "Redis/Atomicity"}, 2},
				{"fails open to a local bucket and comes back", []string{"Miniredis/FailOpen", "Redis/FailOpen"}, 1},
			},
		},
		grade:   gradeTask6,
		planned: task6Planned,
	},
	{
		ID:      "task7",
		Number:  7,
		Title:   "a circuit breaker: failing fast protects the caller",
		Handout: "docs/tasks/task7.md",
		Files:   []string{"exercises/breaker/breaker.go"},
		Hints: []string{
			"Time is a setting to compare, not a timer to run. Store when the cooldown\n" +
				"ends, and let Allow and State compare the clock with it and make the step to\n" +
				"half-open themselves. Task 3's bucket refills the same lazy way.",
			"The window is the last N calls, not the last N seconds: a ring of N outcomes\n" +
				"and a count of failures is enough. Judge it after every outcome, and open\n" +
				"only when the failed share is strictly more than the ratio.",
			"A slow call can report long after the breaker has moved on. Number the\n" +
				"breaker's generations, one more at every transition, and drop outcomes from\n" +
				"an older one. sony/gobreaker's generation counter is the model.",
			"Half-open means a few trials at once. Take the trial slot in Allow, under the\n" +
				"same lock as the check, and give it back when the outcome arrives; otherwise\n" +
				"a crowd passes the check together. See Fowler's \"CircuitBreaker\" article.",
			"Hold the lock only while reading and changing the breaker's fields, never\n" +
				"while sleeping or calling out. An outcome reported twice must count once.",
		},
		Unit: &Unit{
			Package: "breaker", File: "breaker.go", Test: "TestBreaker",
			Checks: []UnitCheck{
				{"starts closed; states have names", []string{"StartsClosed", "StateString"}, 1},
				{"opens on more than the failure ratio, not at it", []string{"OpensOnFailureRatio"}, 2},
				{"no verdict on fewer than MinCalls outcomes", []string{"RespectsMinCalls"}, 1},
				{"only the last Window outcomes count", []string{"SlidingWindow"}, 1},
				{"fails fast while open; half-open at exactly Cooldown", []string{"FailsFastWhileOpen", "CooldownExact"}, 2},
				{"at most HalfOpenMax trials at once", []string{"HalfOpenLimit"}, 2},
				{"trials close it with a fresh window, or reopen it", []string{"HalfOpenSuccessCloses", "HalfOpenFailureReopens"}, 2},
				{"late and repeated outcomes change nothing", []string{"StaleOutcomesIgnored", "DoneTwiceIgnored"}, 2},
				{"defaults for zero and invalid settings", []string{"DefaultSettings"}, 1},
				{"safe for concurrent use", []string{"Concurrent"}, 1},
				{"random settings and sequences against a model", []string{"Model"}, 2},
				{"the same promises on the real clock", []string{"RealClock"}, 1},
			},
		},
		grade:   gradeTask7,
		planned: task7Planned,
	},
	{
		ID:      "task8",
		Number:  8,
		Title:   "four ways of counting requests per window, side by side",
		Handout: "docs/tasks/task8.md",
		Files:   []string{"exercises/counting/counting.go"},
		Hints: []string{
			"Windows are aligned on the Unix epoch, not on when the limiter or the key\n" +
				"started: an instant's window is its Unix nanoseconds divided by the window,\n" +
				"rounded down. Every key's window then ends at the same moment, which is the\n" +
				"fixed window's synchronised return.",
			"The log only ever needs the timestamps that still count, and they arrive in\n" +
				"time order: drop the expired ones from the front before counting. A full log\n" +
				"frees a place when its oldest entry turns one window old, and not a\n" +
				"nanosecond sooner.",
			"The counter's test is an inequality in the time elapsed in the window. Keep it\n" +
				"in integers and solve it for the smallest elapsed time. When the current window\n" +
				"is full, solve it in the next one, where this window's count becomes the\n" +
				"previous one. Cloudflare's post on counting rate limits at scale explains it.",
			"For the bucket, count in units of 1/window of a token: the refill is then limit\n" +
				"units per nanosecond and a token is window units, so the wait is an exact\n" +
				"division rounded up. Task 3's lazy refill and its cap at the burst carry over.",
			"A key whose requests no longer count is the same as a key never seen. Keep the\n" +
				"state of the current and the previous window and drop older state whole, or\n" +
				"sweep when the map has doubled. Throttled keys must survive either way.",
		},
		Unit: &Unit{
			Package: "counting", File: "counting.go", Test: "TestCounting",
			Checks: []UnitCheck{
				{"fixed window: one count per key per window, aligned on the epoch", []string{"FixedWindow/MatchesModel", "FixedWindow/BoundaryBurst"}, 2},
				{"sliding log: exact over any window", []string{"SlidingLog/MatchesModel", "SlidingLog/BoundaryBurst"}, 2},
				{"sliding counter: the previous window weighted by the share still in view", []string{"SlidingCounter/MatchesModel", "SlidingCounter/BoundaryBurst"}, 3},
				{"token bucket: the same average, at most burst + rate × T", []string{"TokenBucket/MatchesModel", "TokenBucket/BoundaryBurst"}, 2},
				{"the exact wait: sleep it and be admitted, never a nanosecond sooner", []string{"FixedWindow/ExactWait", "SlidingLog/ExactWait", "SlidingCounter/ExactWait", "TokenBucket/ExactWait"}, 2},
				{"safe for concurrent use, on the fake and the real clock", []string{"FixedWindow/Concurrent", "FixedWindow/ConcurrentRealClock", "SlidingLog/Concurrent", "SlidingLog/ConcurrentRealClock", "SlidingCounter/Concurrent", "SlidingCounter/ConcurrentRealClock", "TokenBucket/Concurrent", "TokenBucket/ConcurrentRealClock"}, 2},
				{"memory follows recent keys; throttled keys are remembered", []string{"FixedWindow/KeyFlood", "SlidingLog/KeyFlood", "SlidingCounter/KeyFlood", "TokenBucket/KeyFlood"}, 2},
				{"memory per key: counts, or at most limit timestamps", []string{"FixedWindow/MemoryPerKey", "SlidingLog/MemoryPerKey", "SlidingCounter/MemoryPerKey", "TokenBucket/MemoryPerKey"}, 1},
				{"a burst between 1 and limit; settings that cannot work are refused", []string{"TokenBucket/DefaultBurst", "FixedWindow/Settings", "SlidingLog/Settings", "SlidingCounter/Settings", "TokenBucket/Settings"}, 1},
			},
		},
		grade:   gradeTask8,
		planned: task8Planned,
	},
}

// Tasks returns every task in order.
func Tasks() []Task { return append([]Task(nil), tasks...) }

// Lookup returns the task with the given ID, such as "task1".
func Lookup(id string) (Task, bool) {
	for _, t := range tasks {
		if t.ID == id {
			return t, true
		}
	}
	return Task{}, false
}
