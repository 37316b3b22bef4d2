package fakegpu

import "flag"

// RegisterFlags defines on fs one flag per setting of c, each bound to its
// field and defaulting to its current value: --mode, --slots, --work,
// --max-waiting, --deadline, --rate, --burst, --spread-retry-after,
// --redis, --counting, --counting-limit and --counting-window. cmd/fakegpu
// and cmd/counting parse their command lines with them, and Args writes a
// command line from the same definitions, so the two cannot drift apart.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Var((*modeValue)(&c.Mode), "mode", "protection: none, shed, bucket or redis")
	fs.IntVar(&c.Slots, "slots", c.Slots, "requests the GPU works on at once")
	fs.DurationVar(&c.Work, "work", c.Work, "time one request holds its slot")
	fs.IntVar(&c.MaxWaiting, "max-waiting", c.MaxWaiting, "longest line in the protected modes")
	fs.DurationVar(&c.Deadline, "deadline", c.Deadline, "longest wait for a slot in the protected modes (0: off)")
	fs.Float64Var(&c.BucketRate, "rate", c.BucketRate, "per-client bucket refill, tokens per second")
	fs.Float64Var(&c.BucketBurst, "burst", c.BucketBurst, "per-client bucket capacity, tokens")
	fs.BoolVar(&c.SpreadRetryAfter, "spread-retry-after", c.SpreadRetryAfter, "tell shed requests to come back spread out at the server's capacity")
	fs.StringVar(&c.Redis, "redis", c.Redis, "mode redis: the Redis server every worker shares, such as redis://127.0.0.1:6379")
	fs.StringVar(&c.Counting, "counting", c.Counting, "mode bucket: task 8's limiter instead of task 3's bucket (fixed, log, counter or bucket; cmd/counting only)")
	fs.IntVar(&c.CountingLimit, "counting-limit", c.CountingLimit, "with --counting: requests per window per client")
	fs.DurationVar(&c.CountingWindow, "counting-window", c.CountingWindow, "with --counting: the window")
}

// Args returns the command-line flags that make cmd/fakegpu serve c: every
// flag RegisterFlags defines, as --name=value in the order of their names,
// so that the child's configuration never depends on its defaults.
func (c Config) Args() []string {
	fs := flag.NewFlagSet("fakegpu", flag.ContinueOnError)
	c.RegisterFlags(fs) // binds the flags to this copy of c
	var args []string
	fs.VisitAll(func(f *flag.Flag) {
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return args
}

// modeValue is a Mode as a flag.Value: Set accepts only the known modes.
type modeValue Mode

func (m *modeValue) String() string { return string(*m) }

func (m *modeValue) Set(s string) error {
	mode, err := ParseMode(s)
	if err != nil {
		return err
	}
	*m = modeValue(mode)
	return nil
}
