// Command noopserver answers every request at once with 200 and an empty
// body, on the loopback port given as its only argument (0 for any): a
// server that costs nothing, so that a flood against it measures the load
// generator. .ci/generators runs it in a process of its own.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	port := "0"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "noopserver:", err)
		os.Exit(1)
	}
	fmt.Println("http://" + ln.Addr().String() + "/")
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
}
