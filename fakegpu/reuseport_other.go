//go:build !linux

package fakegpu

import (
	"errors"
	"net"
)

// ListenReusePort is only used on Linux, where SO_REUSEPORT balances
// connections; elsewhere workers share one inherited socket instead.
func ListenReusePort(string) (net.Listener, error) {
	return nil, errors.New("SO_REUSEPORT balancing is only used on Linux")
}

// ReusePortBalances reports whether SO_REUSEPORT spreads connections among
// the listeners here. Outside Linux it does not (BSDs give them all to one).
const ReusePortBalances = false
